// Key states are computed from timestamps, identically on every instance:
//   next     published, activates_at in the future
//   active   the newest key whose activates_at has passed (the only one that signs)
//   retiring replaced, still published until its successor has been active for token TTL + clock skew
//   retired  out of the key set (manually, or after the retiring period)
import type { SigningKeyRow } from '../model.js';

export type KeyState = 'next' | 'active' | 'retiring' | 'retired';

export interface KeyStatus {
  row: SigningKeyRow;
  state: KeyState;
  /** When the successor became active (retiring and auto-retired keys). */
  deactivatedAt: Date | null;
  /** When the key leaves (or left) the key set by itself. */
  retiresAt: Date | null;
}

export function computeKeyStates(rows: SigningKeyRow[], now: number, keepPublishedMs: number): KeyStatus[] {
  const manuallyRetired = (r: SigningKeyRow) => r.retiredAt !== null && r.retiredAt.getTime() <= now;
  // Keys that have ever become active, in activation order (manually retired ones included: they did sign).
  const activated = rows
    .filter((r) => r.activatesAt.getTime() <= now)
    .sort((a, b) => a.activatesAt.getTime() - b.activatesAt.getTime() || a.kid.localeCompare(b.kid));
  const candidates = activated.filter((r) => !manuallyRetired(r));
  const active = candidates.at(-1);

  return rows.map((row) => {
    if (row === active) return { row, state: 'active', deactivatedAt: null, retiresAt: null };
    if (row.activatesAt.getTime() > now) {
      return { row, state: manuallyRetired(row) ? 'retired' : 'next', deactivatedAt: null, retiresAt: null };
    }
    const index = activated.indexOf(row);
    const successor = activated.slice(index + 1).find((r) => !manuallyRetired(r) || r.retiredAt!.getTime() > r.activatesAt.getTime());
    const deactivatedAt = successor ? successor.activatesAt : null;
    const retiresAt = deactivatedAt ? new Date(deactivatedAt.getTime() + keepPublishedMs) : null;
    if (manuallyRetired(row)) return { row, state: 'retired', deactivatedAt, retiresAt: row.retiredAt };
    if (retiresAt && retiresAt.getTime() <= now) return { row, state: 'retired', deactivatedAt, retiresAt };
    return { row, state: 'retiring', deactivatedAt, retiresAt };
  });
}
