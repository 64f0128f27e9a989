export { machineCa } from '../../src/images/build-ca.js';
