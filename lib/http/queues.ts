/**
 * The queues themselves, mounted at `/internal/queues` by main.ts (behind the bearer token of
 * lib/http/api.ts): what every queue is and how it stands, and its pause.
 *
 * - `GET /` → 200 `{ at, queues: [{ name, consumer, statuses, jobs, oldest_runnable_age_s,
 *   last_hour, paused, paused_at, state }] }`: counts from the background count
 *   (lib/admin/stats_cache.ts, `at` is its time; null before the first), never counted per
 *   request; `state` is this process's consumer's (null for a host-polled queue).
 * - `POST /:queue/pause` → 200 `{ queue, paused: true, paused_at }`: persisted; every instance
 *   stops claiming the queue's jobs within the NOTIFY's delivery (lib/control.ts). A running job
 *   finishes.
 * - `POST /:queue/resume` → 200 `{ queue, paused: false, paused_at: null }`.
 * - 404 for an unknown queue name (its former names, `QueueView.aliases`, are accepted).
 *
 * @module
 */
import { Hono } from "hono";
import { z } from "zod";
import { describeRoute, zValidator } from "./openapi.ts";
import type { QueueView } from "../admin/queue_view.ts";
import type { StatsCache } from "../admin/stats_cache.ts";
import type { QueueControl } from "../control.ts";

/** What {@linkcode queuesRoutes} needs. */
export interface QueuesDeps {
  views: readonly QueueView[];
  cache: Pick<StatsCache, "snapshot">;
  control: Pick<QueueControl, "pause" | "resume" | "state">;
  /** This process's consumer state by queue name (lib/consumer.ts `ConsumerState`). */
  consumerState: (queue: string) => string | null;
}

/**
 * Build the queue routes.
 *
 * @returns a Hono router to mount under `/internal/queues`.
 */
export function queuesRoutes(deps: QueuesDeps): Hono {
  const app = new Hono();
  const byName = new Map(
    deps.views.flatMap((v) => [v.name, ...(v.aliases ?? [])].map((name) => [name, v] as const)),
  );

  app.get(
    "/",
    describeRoute({
      summary: "Every queue: its counts by status (the background count), pause and consumer",
      responses: { 200: "`{ at, queues: [...] }`" },
      database: false,
    }),
    (c) => {
      const snapshot = deps.cache.snapshot;
      return c.json({
        at: snapshot?.at ?? null,
        queues: deps.views.map((view) => {
          const q = snapshot?.queues.get(view.name);
          const pause = deps.control.state(view.name);
          return {
            name: view.name,
            consumer: view.consumer,
            statuses: view.statuses,
            jobs: q?.stats.byStatus ?? null,
            oldest_runnable_age_s: q?.stats.oldestRunnableAgeS ?? null,
            last_hour: q?.lastHour ?? null,
            open_breakers: q?.openBreakers ?? null,
            paused: pause.paused,
            paused_at: pause.paused_at,
            state: view.consumer === "worker" ? deps.consumerState(view.name) : null,
          };
        }),
      });
    },
  );

  const names = [...byName.keys()] as [string, ...string[]];
  const param = zValidator(
    "param",
    z.object({ queue: z.enum(names) }),
    (result) =>
      result.success ? undefined : Response.json(
        { error: `No such queue: expected one of ${deps.views.map((v) => v.name).join(", ")}` },
        { status: 404 },
      ),
  );
  for (const [action, pause] of [["pause", true], ["resume", false]] as const) {
    app.post(
      `/:queue/${action}`,
      describeRoute({
        summary: pause
          ? "Pause a queue: persisted, every instance claims none of its jobs (a running one finishes)"
          : "Resume a paused queue",
        responses: { 200: "`{ queue, paused, paused_at }`", 404: "No such queue" },
      }),
      param,
      async (c) => {
        const view = byName.get(c.req.valid("param").queue);
        if (!view) return c.json({ error: `No queue named "${c.req.valid("param").queue}"` }, 404);
        const state = pause ? await deps.control.pause(view.name) : await deps.control.resume(
          view.name,
        );
        return c.json(state);
      },
    );
  }
  return app;
}
