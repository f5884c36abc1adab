// Types of tests/server.mjs (for the TypeScript tests).
export declare const root: string;
export declare function trellisBin(): string;
export interface StartedTrellis {
  url: string;
  login: string;
  token: string;
  port: number;
  mock: string;
  repo: string;
  dir: string;
  stop(): Promise<void>;
  /** Kills the server (SIGKILL) and starts another on the same workspace with `args`; url/login/port follow. */
  restart(args?: string[]): Promise<void>;
}
export declare function startTrellis(opts?: { pace?: number; verbose?: boolean; bin?: string }): Promise<StartedTrellis>;
