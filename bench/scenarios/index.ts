// Every scenario of `npm run bench`, in the order they run. One line per scenario.
import type { Scenario } from './types.js';
import { compare } from './compare.js';
import { scale } from './scale.js';
import { fleet } from './fleet.js';
import { fanout } from './fanout.js';
import { audit } from './audit.js';
import { deployed } from './deployed.js';
import { topologies } from './topologies.js';
import { feedflood } from './feedflood.js';
import { keyagents } from './keyagents.js';
import { middleware } from './middleware.js';
import { rolling } from './rolling.js';
import { soak } from './soak.js';
import { profile } from './profile.js';
import { auditSize } from './audit-size.js';
import { embeddedMemory } from './embedded-memory.js';
import { postgresPrepare } from './postgres-prepare.js';
import { auditInsert } from './audit-insert.js';

export const SCENARIOS: Scenario[] = [
  compare,
  scale,
  fleet,
  fanout,
  audit,
  topologies,
  deployed,
  feedflood,
  keyagents,
  middleware,
  rolling,
  soak,
  profile,
  auditSize,
  embeddedMemory,
  postgresPrepare,
  auditInsert,
];
