/** This Rewind's version, as in package.json (a test keeps the two equal). */
export const REWIND_VERSION = '0.1.0';
