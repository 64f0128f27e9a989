import { PassThrough } from 'node:stream';
import { FINISH_SCHEMA } from '../../../src/agent/calls.js';
import { loadConfig } from '../../../src/config/config.js';
import { HumanModel, ModelCancelled } from '../../../src/agent/model.js';
import { DEFAULT_TOOLS, createRegistry } from '../../../src/tools/registry.js';
import type { ToolContext } from '../../../src/tools/types.js';

// The schemas as the loop offers them (the registry only needs a context to list them).
// Schemas depend on the run's limits (a timeout's maximum): the defaults'.
const TOOLS = [
  ...createRegistry({ limits: loadConfig({}).limits } as ToolContext, DEFAULT_TOOLS).schemas(),
  FINISH_SCHEMA,
];

function human(lines: string[], end = true) {
  const input = new PassThrough();
  const output = new PassThrough();
  let printed = '';
  output.on('data', (d: Buffer) => (printed += d.toString()));
  const text = lines.map((l) => `${l}\n`).join('');
  if (end) input.end(text);
  else input.write(text);
  const model = new HumanModel(input, output);
  const next = async () => {
    const reply = await model.complete([], TOOLS);
    const call = reply.message.tool_calls[0]!;
    return { name: call.function.name, args: JSON.parse(call.function.arguments) as unknown };
  };
  return { model, input, next, printed: () => printed };
}

describe('human mode', () => {
  it('help lists every tool with its description; help <tool> prints its JSON Schema', async () => {
    const h = human(['help', 'help edit_file', 'help nope', 'git_diff']);
    expect(await h.next()).toEqual({ name: 'git_diff', args: {} });
    expect(h.printed()).toContain('run_tests: Run the repository');
    expect(h.printed()).toContain('finish: End the run');
    expect(h.printed()).toMatch(/Replace one exact occurrence[^\n]*\n\{\n {2}"type": "object"/);
    expect(h.printed()).toContain('"old_text": {');
    expect(h.printed()).toMatch(/No tool "nope"; tools: list_files/);
  });

  it('JSON continues on the next lines until it parses', async () => {
    const h = human(['run_tests {', '  "tests": [', '    "tests/test_a.py::test_x"', '  ]', '}']);
    expect(await h.next()).toEqual({ name: 'run_tests', args: { tests: ['tests/test_a.py::test_x'] } });
  });

  it('a blank line sends unfinished JSON as it is (the tool answers with the parse error)', async () => {
    const h = human(['read_file {"path":', '']);
    const reply = await h.model.complete([], TOOLS);
    expect(reply.message.tool_calls[0]!.function.arguments).toBe('{"path":');
  });

  it('heredocs fill long string fields, named or the first missing one, without escaping', async () => {
    const h = human([
      'edit_file {"path": "a.py", "version": "v"} <<EOF <<new_text',
      '    return a - b  # "quoted" \\ back',
      'EOF',
      '    return a + b',
      '',
      'new_text',
      'finish <<EOF',
      'done',
      'EOF',
    ]);
    expect(await h.next()).toEqual({
      name: 'edit_file',
      args: {
        path: 'a.py',
        version: 'v',
        old_text: '    return a - b  # "quoted" \\ back\n',
        new_text: '    return a + b\n\n',
      },
    });
    expect(await h.next()).toEqual({ name: 'finish', args: { summary: 'done\n' } });
  });

  it('refuses a heredoc without a complete JSON object or a field left for it', async () => {
    const h = human([
      'git_diff <<EOF',
      'x',
      'EOF',
      'read_file {"path": <<EOF',
      'run_tests',
      'EOF',
      'list_files',
    ]);
    expect(await h.next()).toEqual({ name: 'list_files', args: {} });
    expect(h.printed()).toContain('git_diff has no string field left for <<EOF');
    expect(h.printed()).toContain('Before <<NAME the arguments must be one complete JSON object');
  });

  it('end of input cancels; close() releases an input that is still open', async () => {
    await expect(human([]).model.complete([], TOOLS)).rejects.toBeInstanceOf(ModelCancelled);
    const h = human(['git_diff'], false);
    await h.next();
    expect(h.input.listenerCount('data')).toBeGreaterThan(0);
    h.model.close();
    expect(h.input.listenerCount('data')).toBe(0);
    expect(h.input.isPaused()).toBe(true);
  });
});
