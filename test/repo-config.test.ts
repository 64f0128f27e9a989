import { DEFAULT_TEST_ARGV, parseRepoConfig } from '../src/webhook/repo-config.js';
import { isUnder } from '../src/tools/paths.js';

describe('repository config', () => {
  it('gives the defaults when there is no file or an empty one', () => {
    for (const text of [null, '', '# nothing\n']) {
      const r = parseRepoConfig(text);
      expect(r).toEqual({
        ok: true,
        config: { test: DEFAULT_TEST_ARGV, budgets: {}, protected_paths: [], publish_unverified: false },
      });
    }
  });

  it('reads every setting', () => {
    const r = parseRepoConfig(
      [
        'label: fix-me',
        'test: [npm, test, "--", --silent]',
        'dockerfile: ci/agent.Dockerfile',
        'model: deepseek-chat',
        'budgets: { tokens: 90000, requests: 20, tool_calls: 40, time_s: 600 }',
        'protected_paths: [migrations/, LICENSE]',
        'publish_unverified: true',
      ].join('\n'),
    );
    expect(r).toEqual({
      ok: true,
      config: {
        label: 'fix-me',
        test: ['npm', 'test', '--', '--silent'],
        dockerfile: 'ci/agent.Dockerfile',
        model: 'deepseek-chat',
        budgets: { tokens: 90000, requests: 20, tool_calls: 40, time_s: 600 },
        protected_paths: ['migrations/', 'LICENSE'],
        publish_unverified: true,
      },
    });
  });

  it.each([
    ['test: "pytest -q"', 'test'],
    ['test: []', 'test'],
    ['budgets: { tokens: -5 }', 'budgets.tokens'],
    ['budgets: { cents: 5 }', 'budgets'],
    ['dockerfile: ../../etc/passwd', 'dockerfile'],
    ['protected_paths: [/abs]', 'protected_paths.0'],
    ['colour: blue', 'colour'],
    ['publish_unverified: maybe', 'publish_unverified'],
  ])('reports %s as an error naming the field', (text, field) => {
    const r = parseRepoConfig(text);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toContain('.github/agenticfix.yml is invalid');
    expect(!r.ok && r.error).toContain(field);
  });

  it('reports YAML syntax errors', () => {
    const r = parseRepoConfig('test: [unclosed');
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toContain('not valid YAML');
  });

  it('matches files and directory prefixes, not name prefixes', () => {
    expect(isUnder('.github/workflows/ci.yml', ['.github/workflows'])).toBe(true);
    expect(isUnder('.github/workflows/ci.yml', ['.github/workflows/'])).toBe(true);
    expect(isUnder('.github/workflowsx/ci.yml', ['.github/workflows'])).toBe(false);
    expect(isUnder('LICENSE', ['LICENSE'])).toBe(true);
    expect(isUnder('src/app.py', ['.github/workflows', 'migrations'])).toBe(false);
  });
});
