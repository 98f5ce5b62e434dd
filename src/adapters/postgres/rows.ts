// What the feature modules share to map rows: the driver hands rows as plain records.
export type Row = Record<string, any>;

/** A timestamp column as the ISO string the model carries. */
export const iso = (value: Date | string): string => (value instanceof Date ? value.toISOString() : new Date(value).toISOString());
