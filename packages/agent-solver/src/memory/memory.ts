import {
  DEFAULT_MAX_VALUE_LENGTH,
  type SerializableValue,
  toSerializableTruncated,
} from './serialize.js';

/** One executed step as the planner, verifier and generator see it (the seeds' field names). */
export interface MemoryAction {
  tool_name: string;
  sub_goal: string;
  /** The tool arguments the executor produced (our replacement for the seed's code string). */
  command: SerializableValue;
  result: SerializableValue;
}

/**
 * The log of a run's executed steps, keyed "Action Step N" like the seed's Memory so that a
 * prompt shows the same structure. Commands and results are stored already converted to JSON data
 * with every string cut at `maxValueLength` characters.
 */
export class Memory {
  readonly maxValueLength: number;
  readonly #actions = new Map<string, MemoryAction>();

  constructor(options: { maxValueLength?: number } = {}) {
    this.maxValueLength = options.maxValueLength ?? DEFAULT_MAX_VALUE_LENGTH;
  }

  addAction(
    stepCount: number,
    toolName: string,
    subGoal: string,
    command: unknown,
    result: unknown,
  ): MemoryAction {
    const action: MemoryAction = {
      tool_name: toolName,
      sub_goal: subGoal,
      command: toSerializableTruncated(command, this.maxValueLength),
      result: toSerializableTruncated(result, this.maxValueLength),
    };
    this.#actions.set(`Action Step ${stepCount}`, action);
    return action;
  }

  /** A copy of the log, in insertion order. */
  getActions(): Record<string, MemoryAction> {
    return Object.fromEntries(this.#actions);
  }

  get size(): number {
    return this.#actions.size;
  }

  clear(): void {
    this.#actions.clear();
  }

  /** The log as compact JSON, as it is pasted into prompts. */
  toJSON(): Record<string, MemoryAction> {
    return this.getActions();
  }
}
