// The shapes of the module's commands and replies (see the module's README, "Command
// reference"). Numbers a caller passes may be numbers (safe integers) or bigints; they are
// sent as decimal strings.
export {};
