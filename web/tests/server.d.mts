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
}
export declare function startTrellis(opts?: { pace?: number; verbose?: boolean; bin?: string }): Promise<StartedTrellis>;
