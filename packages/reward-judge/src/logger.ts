/** Where rewards report what a caller must not miss (judge fallbacks, unreadable cache lines). */
export interface RewardLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
}

/** The default: one line on stderr per event. */
export const consoleRewardLogger: RewardLogger = {
  warn(message, fields) {
    console.warn(`[flowgrpo/reward] ${message}${fields ? ` ${JSON.stringify(fields)}` : ''}`);
  },
};
