// A short-lived child process that unpacks the pristine cluster (pristine-cluster.ts, seedCluster): the
// archive's buffers and zlib's state stay in this process and go with it. Done in the service process,
// they left ~20-40 MiB in malloc's heap for good (freed, but not handed back to the system).
// Arguments: the data directory and the archive; prints where the cluster came from.
import { seedCluster } from './pristine-cluster.js';

const [dir, archive] = process.argv.slice(2);
if (!dir || !archive) throw new Error('usage: seed-cluster-process.js <data directory> <archive>');
process.stdout.write(await seedCluster(dir, archive));
