import { readFile } from 'node:fs/promises';
import { type Table, tableFromIPC, tableToIPC } from 'apache-arrow';
import { writeFileAtomically } from '../atomic-file.js';
import { DataFormatError } from '../errors.js';

/** 'file' is the random-access Feather v2 layout (`.arrow`); 'stream' the streaming one (`.arrows`). */
export type ArrowIpcFormat = 'file' | 'stream';

/** Writes an Arrow Table in the IPC format (whole or not at all), creating the parent folder. */
export async function writeArrowIpc(
  path: string,
  table: Table,
  format: ArrowIpcFormat = 'file',
): Promise<void> {
  await writeFileAtomically(path, tableToIPC(table, format));
}

/** Reads an Arrow IPC file or stream (the format is recognised from the bytes). */
export async function readArrowIpc(path: string): Promise<Table> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new DataFormatError(`cannot open: ${reason}`, { file: path }, { cause });
  }
  try {
    const table = tableFromIPC(bytes);
    // The reader returns an empty table for bytes with no IPC message; treat that as corrupt.
    if (table.schema.fields.length === 0 && bytes.byteLength > 0) {
      throw new Error('no Arrow schema message found');
    }
    return table;
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new DataFormatError(`not an Arrow IPC file: ${reason}`, { file: path }, { cause });
  }
}
