// Whether this instance's clock may stamp tokens. Tokens carry iat/exp from the issuing instance's
// clock and revocation cut-offs come from the database's: an instance whose clock is far from the
// database's issues tokens that platforms refuse (ahead) or that slip past a cut-off (ahead by more than
// REVOCATION_ISSUED_SLACK_SECONDS). adapters/postgres/clock-skew.ts measures it.
export interface IssuingClock {
  /** Why this instance must not issue tokens now, or undefined when it may. */
  refusal(): string | undefined;
}

/** No check (a process without a database clock to compare with). */
export const ANY_CLOCK: IssuingClock = { refusal: () => undefined };
