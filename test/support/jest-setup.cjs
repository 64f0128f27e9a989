// Jest's ESM support lists `process`'s keys when a module imports node:process and rejects keys added
// afterwards. signal-exit 3 (through proper-lockfile) adds `__signal_exit_emitter__` when it loads, so
// suites failed at random with "Export '__signal_exit_emitter__' is not defined in module"
// (jestjs/jest#15077). Declaring the key up front keeps the list stable; signal-exit fills it in.
if (!Object.prototype.hasOwnProperty.call(process, '__signal_exit_emitter__')) {
  process.__signal_exit_emitter__ = undefined;
}
// The same for signal-exit 4 (through execa, BullMQ's dependencies): it assigns `process.emit` and
// `process.reallyExit`, making `emit` an own key that jest's list did not have ("Export 'emit' is not
// defined in module", seen in CI after the distributed queue arrived). Made own keys up front.
for (const key of ['emit', 'reallyExit']) {
  if (!Object.prototype.hasOwnProperty.call(process, key)) {
    const inherited = process[key];
    process[key] = inherited;
  }
}
