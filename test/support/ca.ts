export { machineCa } from '../../src/environment/build-ca.js';
