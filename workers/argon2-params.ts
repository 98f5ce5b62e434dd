// argon2id parameters for agent secrets: OWASP's recommended minimum (19 MiB, 2 passes, 1 lane).
// They are stored in every hash string, so raising them later still verifies old hashes.
export const ARGON2_OPTIONS = {
  algorithm: 2, // Algorithm.Argon2id (const enum in @node-rs/argon2)
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
} as const;
