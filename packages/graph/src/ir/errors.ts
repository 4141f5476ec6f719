import { FlowGrpoError, type FlowGrpoErrorOptions } from '@flowgrpo/core';
import type { Shape } from './types.js';

/** A graph could not be built, differentiated, evaluated or exported; names the node at fault. */
export class GraphError extends FlowGrpoError {
  static override readonly code = 'GRAPH_ERROR';
  readonly node: string | undefined;
  readonly op: string | undefined;
  readonly inputShapes: readonly (Shape | undefined)[] | undefined;
  constructor(
    message: string,
    fields: { node?: string; op?: string; inputShapes?: readonly (Shape | undefined)[] } = {},
    options?: FlowGrpoErrorOptions,
  ) {
    const shapes = fields.inputShapes?.map((s) => (s ? `[${s.join(', ')}]` : '?')).join(', ');
    const where = fields.node
      ? `${fields.node} (${fields.op ?? '?'}${shapes ? `; inputs ${shapes}` : ''}): `
      : '';
    super(`${where}${message}`, options);
    this.node = fields.node;
    this.op = fields.op;
    this.inputShapes = fields.inputShapes;
  }
}
