import type { FixedRule, GcraRule, SlidingRule } from './types.js';
/** The algorithm of the rules a limit string makes. */
export type StringAlgorithm = 'sliding' | 'fixed' | 'gcra';
/** The rules of a limit string, in its order (TypeError when it is not one). */
export declare function parseLimitString(text: string, algorithm?: StringAlgorithm): (SlidingRule | FixedRule | GcraRule)[];
