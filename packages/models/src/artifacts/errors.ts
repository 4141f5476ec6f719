import { FlowGrpoError } from '@flowgrpo/core';

/**
 * The folder an artifacts build would replace holds something that is not artifacts (a build
 * replaces its folder whole: a model folder or a project named by mistake would be deleted).
 */
export class ArtifactsDirNotEmptyError extends FlowGrpoError {
  static override readonly code = 'ARTIFACTS_DIR_NOT_EMPTY';
  readonly dir: string;
  /** What it holds. */
  readonly entries: readonly string[];
  constructor(dir: string, entries: readonly string[], manifest: string) {
    const shown = `${entries.slice(0, 3).join(', ')}${entries.length > 3 ? ', …' : ''}`;
    super(
      `${dir} holds ${shown} and no ${manifest}: an artifacts build replaces its folder whole, so it goes only into a new, empty or artifacts folder`,
      { hint: 'name a new or empty folder for the artifacts, or move that folder away' },
    );
    this.dir = dir;
    this.entries = entries;
  }
}
