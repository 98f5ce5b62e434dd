// In process: these settings are validated like every other (named, all at once).
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';

const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
};

describe('configuration limits', () => {
  it('ARGON2_MAX_PER_ADDRESS defaults to a sixteenth of the argon2 queue (at least 1) and may not exceed it', () => {
    expect(loadConfig({}).argon2MaxPerAddress).toBe(4); // ARGON2_MAX_QUEUE 64
    expect(loadConfig({ ARGON2_MAX_QUEUE: '8' }).argon2MaxPerAddress).toBe(1);
    expect(loadConfig({ ARGON2_MAX_QUEUE: '320' }).argon2MaxPerAddress).toBe(20);
    expect(loadConfig({ ARGON2_MAX_PER_ADDRESS: '10' }).argon2MaxPerAddress).toBe(10);
    expect(problemsOf({ ARGON2_MAX_PER_ADDRESS: '65' }).join()).toMatch(/ARGON2_MAX_PER_ADDRESS must not exceed ARGON2_MAX_QUEUE/);
    expect(problemsOf({ ARGON2_MAX_PER_ADDRESS: '0' }).join()).toMatch(/ARGON2_MAX_PER_ADDRESS must be between 1/);
    expect(problemsOf({ ARGON2_MAX_PER_ADDRESS: 'many' }).join()).toMatch(/ARGON2_MAX_PER_ADDRESS must be a whole number/);
  });

  it('UV_THREADPOOL_SIZE is validated (libuv accepts 1 to 1024)', () => {
    expect(loadConfig({ UV_THREADPOOL_SIZE: '2' }).uvThreadpoolSize).toBe(2);
    expect(problemsOf({ UV_THREADPOOL_SIZE: '0' }).join()).toMatch(/UV_THREADPOOL_SIZE must be between 1 and 1024/);
    expect(problemsOf({ UV_THREADPOOL_SIZE: '4096' }).join()).toMatch(/UV_THREADPOOL_SIZE must be between 1 and 1024/);
    expect(problemsOf({ UV_THREADPOOL_SIZE: 'two' }).join()).toMatch(/UV_THREADPOOL_SIZE must be a whole number/);
  });
});
