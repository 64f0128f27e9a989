// Jest's ESM support lists `process`'s keys when a module imports node:process and rejects keys added
// afterwards. signal-exit 3 (through proper-lockfile) adds `__signal_exit_emitter__` when it loads, so
// suites failed at random with "Export '__signal_exit_emitter__' is not defined in module"
// (jestjs/jest#15077). Declaring the key up front keeps the list stable; signal-exit fills it in.
if (!Object.prototype.hasOwnProperty.call(process, '__signal_exit_emitter__')) {
  process.__signal_exit_emitter__ = undefined;
}
