import assert from "node:assert/strict";
import { EventHub, type SequencedEvent } from "../../lib/events.ts";

function publish(hub: EventHub, n: number): void {
  for (let i = 1; i <= n; i++) {
    hub.publish({
      queue: "ingestion",
      id: String(i),
      transition: "claimed",
      status: "Processing",
      attempt: 1,
    });
  }
}

Deno.test("EventHub keeps a lagging subscriber's newest events and drops its oldest (ADR-052)", () => {
  const hub = new EventHub();
  const dropped: string[] = [];
  const sub = hub.subscribe(3, (e) => dropped.push(e.id));
  publish(hub, 5);
  const kept: SequencedEvent[] = [];
  for (let r = sub.channel.tryRead(); r.ok; r = sub.channel.tryRead()) kept.push(r.value);
  assert.deepEqual(kept.map((e) => e.id), ["3", "4", "5"], "the freshest events are kept");
  assert.deepEqual(dropped, ["1", "2"]);
  assert.equal(hub.dropped, 2);
  sub.close();
});

Deno.test("EventHub gives each subscriber its own buffer: a stuck one never starves another", () => {
  const hub = new EventHub();
  const stuck = hub.subscribe(1);
  const live = hub.subscribe(10);
  publish(hub, 4);
  const ids: string[] = [];
  for (let r = live.channel.tryRead(); r.ok; r = live.channel.tryRead()) ids.push(r.value.id);
  assert.deepEqual(ids, ["1", "2", "3", "4"]);
  assert.equal(stuck.channel.size, 1);
  hub.close();
  assert.equal(hub.subscribers, 0);
});
