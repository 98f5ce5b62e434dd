// Entry point (npm start, the image, the tests). Sizes libuv's thread pool before anything can start it (jose signs through WebCrypto,
// which runs each RSA operation there): one thread per core measured faster than the default 4 on
// 2 cores (less oversubscription). An explicit UV_THREADPOOL_SIZE wins.
import os from 'node:os';

process.env.UV_THREADPOOL_SIZE ??= String(Math.max(2, os.availableParallelism?.() ?? os.cpus().length));
await import('./app/run-service.js');
