export function add(a, b) {
  return a + b;
}

export function subtract(a, b) {
  return b - a;
}

export function multiply(a, b) {
  return a * b;
}

export function divide(a, b) {
  return a / b;
}
