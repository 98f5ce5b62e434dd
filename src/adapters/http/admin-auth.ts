// The admin bearer token check. Both sides are hashed with SHA-256 first, so every candidate, whatever
// its length or prefix, costs one comparison of 32 bytes with 32 bytes in constant time: the answer's
// timing says nothing about how close a guess was.
import { createHash, timingSafeEqual } from 'node:crypto';

/** Compares two equal-length buffers; injectable so tests can watch what is compared. */
export type FixedLengthCompare = (presented: Buffer, expected: Buffer) => boolean;

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Returns the check of an Authorization header value against `Bearer <token>`. */
export function adminTokenCheck(token: string, compare: FixedLengthCompare = timingSafeEqual): (authorization: string) => boolean {
  const expected = sha256(`Bearer ${token}`);
  return (authorization) => compare(sha256(authorization), expected);
}
