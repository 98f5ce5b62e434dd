// Entry point (npm start, the image, the tests). Sizes libuv's thread pool before anything can start it
// (jose signs through WebCrypto, which runs each RSA operation there; the rule is the settings table's).
// An explicit UV_THREADPOOL_SIZE wins.
import { defaultUvThreadpoolSize } from './config/settings.js';

process.env.UV_THREADPOOL_SIZE ??= String(defaultUvThreadpoolSize());
await import('./app/run-service.js');
