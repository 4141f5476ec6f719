import { fileURLToPath } from 'node:url';

// The templates `flowgrpo init` copies ship in the package's templates/ folder. This file sits
// directly in src/ (and its build directly in dist/, beside the one-file bundle dist/flowgrpo.js),
// so one folder up is the package root from the sources, the tsc build and the bundle alike.

/** The folder holding `templates/<name>/`. */
export function templatesDir(): string {
  return fileURLToPath(new URL('../templates/', import.meta.url));
}
