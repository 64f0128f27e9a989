import { test } from 'node:test';
import assert from 'node:assert/strict';
import { add, subtract, multiply, divide } from '../src/calculator.js';

test('add sums two numbers', () => {
  assert.equal(add(2, 3), 5);
});

test('subtract takes the second number from the first', () => {
  assert.equal(subtract(7, 2), 5);
});

test('multiply multiplies two numbers', () => {
  assert.equal(multiply(4, 3), 12);
});

test('divide divides the first number by the second', () => {
  assert.equal(divide(9, 3), 3);
});

test('divide by zero throws a RangeError', () => {
  assert.throws(() => divide(1, 0), RangeError);
});
