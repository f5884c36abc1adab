// A tool call's progress line (format.ts `progressText`): the wording the CLI and ACP use
// (trellis_protocol `SessionEvent::progress_text`). No browser or server needed.
import { test, expect } from '@playwright/test';
import { progressText } from '../src/format';

test('tool progress reads as one line', () => {
  expect(progressText({ progress: 3, total: 5 })).toBe('3/5 (60%)');
  expect(progressText({ progress: 0.25, total: 1, message: ' copying ' })).toBe('0.25/1 (25%) · copying');
  expect(progressText({ progress: 12, message: '' })).toBe('12');
  expect(progressText({ progress: 7, total: 5 })).toBe('7/5 (100%)');
});
