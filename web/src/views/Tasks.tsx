// The task tree of a task_tree run (docs/workflows.md): the remit, the milestones in order and
// each one's tasks with their status, dependencies, attempts and why a task failed or is
// blocked.
// Reloaded whenever a step of the run completes.

import { get, enc } from '../api';
import type { GraphResponse, TreeTask } from '../api';
import type { RunModel } from '../runModel';
import { useNotifier } from '../store';
import { InlineError, Spinner, useLoad } from '../ui';

export function Tasks({ m }: { m: RunModel }) {
  useNotifier(m);
  const graph = useLoad(() => get<GraphResponse>(`/api/workflows/${enc(m.id)}/graph`), [m.id, m.record?.step, m.status]);
  if (graph.loading && !graph.data) return <Spinner label="Loading the task tree" />;
  if (graph.error && !graph.data) return <InlineError text={graph.error} testid="tasks-error" />;
  const tree = graph.data?.taskTree;
  if (!tree || tree.milestones.length === 0)
    return (
      <p class="muted" data-testid="tasks-empty">
        No task tree yet{m.status === 'running' ? ': the remit and milestones come first' : ''}.
      </p>
    );
  const tasks = tree.order.map((id) => tree.tasks[id]).filter((t): t is TreeTask => !!t);
  const counts = new Map<string, number>();
  for (const t of tasks) counts.set(t.status, (counts.get(t.status) ?? 0) + 1);
  return (
    <div class="tasks" data-testid="tasks">
      <p data-testid="tasks-remit">
        <strong>Remit:</strong> {tree.remit}
      </p>
      <p class="muted" data-testid="tasks-counts">
        {tasks.length} tasks: {[...counts.entries()].map(([s, n]) => `${n} ${s.toLowerCase().replace('_', ' ')}`).join(', ') || 'none yet'}
      </p>
      {tree.milestones.map((ms) => (
        <section key={ms.id} aria-labelledby={`ms-${ms.id}`} data-testid="milestone" data-id={ms.id} data-status={ms.status}>
          <h2 id={`ms-${ms.id}`}>
            {ms.id}: {ms.description} <span class="muted">({ms.status.toLowerCase()})</span>
          </h2>
          <table class="task-table">
            <thead>
              <tr>
                <th scope="col">Task</th>
                <th scope="col">Status</th>
                <th scope="col">After</th>
                <th scope="col">Attempts</th>
                <th scope="col">Notes</th>
              </tr>
            </thead>
            <tbody>
              {tasks
                .filter((t) => t.milestone === ms.id)
                .map((t) => (
                  <tr key={t.id} data-testid="task" data-id={t.id} data-status={t.status} aria-current={tree.current_task === t.id ? 'step' : undefined}>
                    <td>
                      <code>{t.id}</code> {t.description}
                    </td>
                    <td>{t.status.replace('_', ' ')}</td>
                    <td>{(t.depends_on ?? []).join(', ')}</td>
                    <td>
                      {Object.entries(t.attempts ?? {})
                        .map(([stage, n]) => `${stage} ${n}`)
                        .join(', ')}
                    </td>
                    <td>{t.last_failure_reason ?? t.qa_feedback ?? t.result_summary ?? ''}</td>
                  </tr>
                ))}
            </tbody>
          </table>
        </section>
      ))}
    </div>
  );
}
