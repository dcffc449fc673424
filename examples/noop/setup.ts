/**
 * The example queue in the process (lib/queue_setup.ts): its settings (`NOOP_*`), its context and
 * no routes. A new queue's `setup.ts` has this shape.
 *
 * @module
 */
import { parseQueueSettings } from "../../lib/config.ts";
import { consumed, defineQueue } from "../../lib/queue_setup.ts";
import * as noop from "./mod.ts";
import { noopView } from "./view.ts";

export const queue = defineQueue({
  name: noop.name,
  view: noopView,
  settings: (env) => parseQueueSettings(env, noop.defaults),
  setup: ({ base }, common) => ({
    consume: consumed(noop, { ...base }, common.timeoutMs),
    routes: {},
  }),
});
