import { parseCommand } from '../../../src/webhook/commands.js';

describe('parseCommand', () => {
  it('ignores comments not addressed to the app', () => {
    expect(parseCommand('looks good to me')).toEqual({ type: 'none' });
    expect(parseCommand('please /agenticfix rerun')).toEqual({ type: 'none' });
    expect(parseCommand('/agenticfixer rerun')).toEqual({ type: 'none' });
    expect(parseCommand('')).toEqual({ type: 'none' });
  });

  it('parses the simple commands, case-insensitively and with spaces between and after the words', () => {
    expect(parseCommand('/agenticfix cancel')).toEqual({ type: 'command', command: { kind: 'cancel' } });
    expect(parseCommand('/AgenticFix   STATUS  ')).toEqual({
      type: 'command',
      command: { kind: 'status' },
    });
    expect(parseCommand('/agenticfix help')).toEqual({ type: 'command', command: { kind: 'help' } });
  });

  it('reads a command only at the start of an unindented first line', () => {
    // An indented code block quoting a command (the attack), and other indentation, are not commands.
    expect(parseCommand('    /agenticfix cancel')).toEqual({ type: 'none' });
    expect(parseCommand('    /agenticfix cancel\n\nthat is how you stop it')).toEqual({ type: 'none' });
    expect(parseCommand('\t/agenticfix cancel')).toEqual({ type: 'none' });
    expect(parseCommand(' /agenticfix rerun')).toEqual({ type: 'none' });
    expect(parseCommand('\u00a0/agenticfix rerun')).toEqual({ type: 'none' });
    expect(parseCommand('> /agenticfix cancel')).toEqual({ type: 'none' });
    expect(parseCommand('```\n/agenticfix cancel\n```')).toEqual({ type: 'none' });
  });

  it('reads only the first line', () => {
    expect(parseCommand('/agenticfix rerun\n/agenticfix cancel')).toEqual({
      type: 'command',
      command: { kind: 'rerun' },
    });
    expect(parseCommand('thanks!\r\n/agenticfix cancel')).toEqual({ type: 'none' });
  });

  it('parses rerun options', () => {
    expect(parseCommand('/agenticfix rerun model=deepseek-chat budget=50000')).toEqual({
      type: 'command',
      command: { kind: 'rerun', model: 'deepseek-chat', budget: 50000 },
    });
    expect(parseCommand('/agenticfix rerun model=qwen/qwen3-coder:free')).toEqual({
      type: 'command',
      command: { kind: 'rerun', model: 'qwen/qwen3-coder:free' },
    });
  });

  it('reads revise feedback from the rest of the first line and every line after it', () => {
    expect(parseCommand('/agenticfix revise make the error message name the argument')).toEqual({
      type: 'command',
      command: { kind: 'revise', text: 'make the error message name the argument' },
    });
    expect(parseCommand('/AgenticFix  Revise  rename x\r\nand keep y\n\n  indented too  ')).toEqual({
      type: 'command',
      command: { kind: 'revise', text: 'rename x\r\nand keep y\n\n  indented too' },
    });
    expect(parseCommand('/agenticfix revise\nonly below')).toEqual({
      type: 'command',
      command: { kind: 'revise', text: 'only below' },
    });
  });

  it.each([
    ['/agenticfix revise', 'needs the change'],
    ['/agenticfix revise   \n  ', 'needs the change'],
    ['/agenticfix', 'missing command'],
    ['/agenticfix deploy', 'unknown command'],
    ['/agenticfix rerun budget=lots', 'budget'],
    ['/agenticfix rerun budget=12', 'budget'],
    ['/agenticfix rerun temperature=2', 'temperature'],
    ['/agenticfix rerun model=a;rm', 'model'],
    ['/agenticfix rerun model=a model=b', 'twice'],
    ['/agenticfix rerun now', 'key=value'],
    ['/agenticfix cancel now', 'no arguments'],
  ])('rejects %s with a reason', (body, reason) => {
    const parsed = parseCommand(body);
    expect(parsed.type).toBe('invalid');
    expect(parsed.type === 'invalid' && parsed.reason).toContain(reason);
  });
});
