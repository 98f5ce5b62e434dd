// Topology kit (tests and bench): real production data topologies on loopback. Start functions return
// handles; call stopAll() in afterAll so that everything is torn down even when a test failed.
//   startPostgres / startStandby / promote / waitForReplay   private Postgres 15 clusters, streaming replication
//   startPgBouncer                                           PgBouncer (transaction mode) in front of one
//   startRedis                                               one standalone Redis server
//   startRedisSentinelGroup                                  Redis primary + replica + 3 sentinels
//   startRedisCluster                                        6-node Redis Cluster (3 masters + 3 replicas)
export { stopAll, leftovers, pollFor, pickPort, TopologyTimeoutError, ProcessExitedError } from './common.js';
export { startPostgres, startStandby, promote, waitForReplay, PostgresNode, type PostgresOptions } from './postgres.js';
export { startPgBouncer, PgBouncerNode, type PgBouncerOptions } from './pgbouncer.js';
export { redisCommand, RedisNode, startRedis, RedisServer } from './redis.js';
export { startRedisSentinelGroup, RedisSentinelGroup, type RedisSentinelOptions, type Address } from './redis-sentinel.js';
export { startRedisCluster, RedisCluster, parseClusterNodes, type ClusterNodeInfo, type RedisClusterOptions } from './redis-cluster.js';
