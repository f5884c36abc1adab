import { signal } from './store';

export interface Workspace {
  id: string;
  root: string;
}

/** The served workspaces (`GET /api/workspaces`), loaded at start. */
export const workspaces = signal<Workspace[]>([]);
