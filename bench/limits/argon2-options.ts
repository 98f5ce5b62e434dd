// The service's argon2id parameters (workers/argon2-params.ts), so the ceiling is measured with exactly
// what the service's pool uses.
import type { Options } from '@node-rs/argon2';
import { ARGON2_OPTIONS } from '../../workers/argon2-params.js';

export type Argon2Options = Pick<Options, 'memoryCost' | 'timeCost' | 'parallelism' | 'algorithm'>;

export async function loadArgon2Options(): Promise<{ options: Argon2Options; source: string }> {
  return { options: { ...ARGON2_OPTIONS }, source: 'workers/argon2-params.ts' };
}
