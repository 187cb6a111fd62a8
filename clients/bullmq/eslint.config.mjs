// The package's TypeScript is linted with typescript-eslint's strict rules (`npm run lint`,
// part of `npm test`); formatting is prettier's (.prettierrc.json).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/**', 'node_modules/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  js.configs.recommended,
  tseslint.configs.strict,
  {
    rules: {
      // An argument or binding kept for its place (an interface's signature, a destructured
      // field left out) is named with a leading underscore.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['test/**'],
    rules: {
      // A test's `x!` asserts what it reads is there; when it is not, the test fails on it.
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
