/**
 * piw-channels for Pi: shows Pi Workflows human decisions in this session and answers them.
 *
 * On session start it spawns `piw-channels pi bridge` (or `$PIW_CHANNELS_BIN pi bridge`) and
 * talks to it in strict JSON lines (LF only; Node's readline is avoided because it also splits
 * on U+2028/U+2029). Each delivered decision is added to the session as a custom message with
 * no model turn, and its session entry id is reported back as proof of delivery. `/decision`
 * opens Pi's select and input dialogs and sends the answer with `source: "interactive"`: only
 * a person using these dialogs answers; the model has no tool to do so.
 *
 * Protocol (see adapters/pi/bridge.py):
 *   to the bridge:   hello, delivered, answer
 *   from the bridge: deliver, settle, result, error
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { type ExtensionAPI, type ExtensionContext, VERSION } from "@mariozechner/pi-coding-agent";

const CUSTOM_TYPE = "piw-channels-decision";
const RESULT_TIMEOUT_MS = 15_000;
const STDERR_KEPT = 4096;
const IDLE_POLL_MS = 100;

interface TextInput {
	name: string;
	prompt: string;
	min_length: number;
	max_length: number;
}

interface Choice {
	id: string;
	label: string;
	input: TextInput | null;
}

interface Deliver {
	type: "deliver";
	message_id: string;
	decision_id: string;
	request_digest: string;
	title: string;
	text: string;
	choices: Choice[];
}

interface Result {
	type: "result";
	event_id: string;
	result: string;
	message: string;
	outcome: string | null;
	label: string | null;
	choice: string | null;
	reason: string | null;
}

type Inbound =
	| Deliver
	| Result
	| { type: "settle"; decision_id: string; outcome: string; text: string }
	| { type: "error"; code: string; message: string; event_id?: string };

function piVersion(): string {
	return typeof VERSION === "string" && VERSION ? VERSION : "unknown";
}

function piMode(ctx: ExtensionContext): string {
	if (!ctx.hasUI) return "print";
	const at = process.argv.indexOf("--mode");
	return at >= 0 ? (process.argv[at + 1] ?? "tui") : "tui";
}

/** "bridge exited (77): <the last lines it printed>": the fix is usually in them. */
function exitNotice(code: number | null, stderr: string): string {
	const said = stderr
		.split("\n")
		.map((line) => line.trim())
		.filter((line) => line.length > 0)
		.slice(-3)
		.join(" / ");
	return `piw-channels bridge exited (${code ?? "signal"})${said ? `: ${said}` : ""}`;
}

function describe(result: Result): string {
	const winner = result.label ?? result.choice ?? result.reason ?? "";
	switch (result.result) {
		case "won":
		case "adopted":
			return `Accepted: ${winner}`;
		case "already_resolved":
			return `Already decided: ${result.outcome === "accepted" ? winner : `cancelled (${winner})`}`;
		case "stale":
			return `Stale: ${result.message}`;
		default:
			return `Rejected: ${result.message}`;
	}
}

/** One bridge child for one session. */
class Bridge {
	readonly open = new Map<string, Deliver>();
	private readonly queue: Deliver[] = [];
	private readonly waiting = new Map<string, (result: Result) => void>();
	private buffer = Buffer.alloc(0);
	private stderr = "";
	private flushTimer: ReturnType<typeof setTimeout> | undefined;
	private stopped = false;
	private readonly child: ChildProcessWithoutNullStreams;

	constructor(
		private readonly pi: ExtensionAPI,
		private ctx: ExtensionContext,
	) {
		const bin = process.env.PIW_CHANNELS_BIN || "piw-channels";
		this.child = spawn(bin, ["pi", "bridge"], { stdio: ["pipe", "pipe", "pipe"] });
		this.child.on("error", (error) => this.notify(`piw-channels bridge: ${error.message}`, "error"));
		this.child.on("close", (code) => {
			if (!this.stopped && code !== 0) this.notify(exitNotice(code, this.stderr), "error");
		});
		this.child.stdin.on("error", () => undefined); // the child is gone; "close" reports it
		this.child.stdout.on("data", (chunk: Buffer) => this.receive(chunk));
		// Keep the pipe drained, and the end of what it said: a bridge that cannot start prints
		// the fix there (for example `chmod 700 ...`).
		this.child.stderr.on("data", (chunk: Buffer) => {
			this.stderr = (this.stderr + chunk.toString("utf8")).slice(-STDERR_KEPT);
		});
		this.send({
			type: "hello",
			session_id: ctx.sessionManager.getSessionId(),
			pi_version: piVersion(),
			mode: piMode(ctx),
		});
	}

	stop(): void {
		this.stopped = true;
		if (this.flushTimer) clearTimeout(this.flushTimer);
		this.child.stdin.end(); // the bridge releases its lease when stdin closes
	}

	send(message: Record<string, unknown>): void {
		if (!this.stopped) this.child.stdin.write(`${JSON.stringify(message)}\n`);
	}

	/** Send an answer and wait for its result. */
	answer(decision: Deliver, choice: Choice, text: string | undefined): Promise<Result | undefined> {
		// "ui." marks an answer from this extension's dialogs; the dot also keeps the stored key
		// `<session uuid>:ui.<uuid>` from looking like a Bot API token (`<digits>:<secret>`).
		const eventId = `ui.${randomUUID()}`;
		return new Promise((resolve) => {
			const timer = setTimeout(() => {
				this.waiting.delete(eventId);
				resolve(undefined);
			}, RESULT_TIMEOUT_MS);
			this.waiting.set(eventId, (result) => {
				clearTimeout(timer);
				resolve(result);
			});
			this.send({
				type: "answer",
				decision_id: decision.decision_id,
				request_digest: decision.request_digest,
				choice: choice.id,
				input: text ?? null,
				event_id: eventId,
				source: "interactive",
			});
		});
	}

	/** Show queued decisions once Pi is idle (a message sent mid-turn would steer the model).
	 * Pi turns idle only after the `agent_end` listeners return, so while anything is queued
	 * this looks again shortly instead of waiting for the next event. */
	flush(ctx?: ExtensionContext): void {
		if (ctx) this.ctx = ctx;
		if (this.stopped || this.queue.length === 0) return;
		if (!this.ctx.isIdle()) {
			this.flushTimer ??= setTimeout(() => {
				this.flushTimer = undefined;
				this.flush();
			}, IDLE_POLL_MS);
			return;
		}
		while (this.queue.length > 0) {
			const item = this.queue.shift() as Deliver;
			if (!this.open.has(item.decision_id)) continue; // settled while it waited
			let entryId = this.findEntry(item.message_id);
			if (entryId === undefined) {
				this.pi.sendMessage({
					customType: CUSTOM_TYPE,
					content: `${item.text}\n\nAnswer with /decision`,
					display: true,
					details: { messageId: item.message_id, decisionId: item.decision_id },
				});
				entryId = this.findEntry(item.message_id);
			}
			if (entryId !== undefined) this.send({ type: "delivered", message_id: item.message_id, entry_id: entryId });
		}
	}

	/** The entry that already shows this delivery (a restarted bridge may deliver it again). */
	private findEntry(messageId: string): string | undefined {
		const branch = this.ctx.sessionManager.getBranch();
		for (let i = branch.length - 1; i >= 0; i--) {
			const entry = branch[i] as { type: string; id: string; customType?: string; details?: { messageId?: string } };
			if (entry.type === "custom_message" && entry.customType === CUSTOM_TYPE && entry.details?.messageId === messageId) {
				return entry.id;
			}
		}
		return undefined;
	}

	private receive(chunk: Buffer): void {
		this.buffer = Buffer.concat([this.buffer, chunk]);
		let at = this.buffer.indexOf(0x0a);
		while (at >= 0) {
			let line = this.buffer.subarray(0, at).toString("utf8");
			this.buffer = this.buffer.subarray(at + 1);
			if (line.endsWith("\r")) line = line.slice(0, -1);
			if (line.trim()) this.handleLine(line);
			at = this.buffer.indexOf(0x0a);
		}
	}

	/** One line from the bridge; anything that is not a protocol message is reported, never fatal. */
	private handleLine(line: string): void {
		let message: unknown;
		try {
			message = JSON.parse(line);
		} catch {
			message = undefined;
		}
		if (typeof message !== "object" || message === null || typeof (message as { type?: unknown }).type !== "string") {
			this.notify(`piw-channels: the bridge printed something that is not a protocol line: ${line.slice(0, 120)}`, "warning");
			return;
		}
		try {
			this.handle(message as Inbound);
		} catch (error) {
			// A line of the right shape with wrong fields must not take Pi down either.
			this.notify(`piw-channels: could not handle a bridge line: ${(error as Error).message}`, "warning");
		}
	}

	private handle(message: Inbound): void {
		switch (message.type) {
			case "deliver":
				this.open.set(message.decision_id, message);
				this.queue.push(message);
				this.flush();
				break;
			case "settle": {
				this.open.delete(message.decision_id);
				const waiting = this.queue.findIndex((item) => item.decision_id === message.decision_id);
				if (waiting >= 0) this.queue.splice(waiting, 1);
				this.notify(message.text.split("\n")[0] ?? message.text, "info");
				break;
			}
			case "result": {
				const waiter = this.waiting.get(message.event_id);
				this.waiting.delete(message.event_id);
				waiter?.(message);
				break;
			}
			case "error": {
				const waiter = message.event_id === undefined ? undefined : this.waiting.get(message.event_id);
				if (waiter && message.event_id !== undefined) {
					// The answer was not taken at all (for example another bridge still serves this session).
					this.waiting.delete(message.event_id);
					waiter({
						type: "result",
						event_id: message.event_id,
						result: "rejected",
						message: message.message,
						outcome: null,
						label: null,
						choice: null,
						reason: null,
					});
					break;
				}
				this.notify(`piw-channels: ${message.message}`, message.code === "lease_held" ? "warning" : "error");
				break;
			}
		}
	}

	private notify(text: string, kind: "info" | "warning" | "error"): void {
		if (this.ctx.hasUI) this.ctx.ui.notify(text, kind);
	}
}

export default function piwChannels(pi: ExtensionAPI): void {
	let bridge: Bridge | undefined;

	pi.on("session_start", async (_event, ctx) => {
		bridge?.stop();
		bridge = new Bridge(pi, ctx);
	});
	pi.on("session_shutdown", async () => {
		bridge?.stop();
		bridge = undefined;
	});
	pi.on("agent_end", async (_event, ctx) => bridge?.flush(ctx));

	pi.registerCommand("decision", {
		description: "Answer an open Pi Workflows decision",
		handler: async (_args, ctx) => {
			const open = bridge ? [...bridge.open.values()] : [];
			if (!bridge || open.length === 0) {
				ctx.ui.notify("No open decisions", "info");
				return;
			}
			const titles = open.map((d, i) => `${i + 1}. ${d.title}`);
			const pickedTitle = await ctx.ui.select("Open decisions", titles);
			const decision = open[titles.indexOf(pickedTitle ?? "")];
			if (!decision) return;
			const labels = decision.choices.map((c, i) => `${i + 1}. ${c.label}`);
			const pickedLabel = await ctx.ui.select(decision.title, labels);
			const choice = decision.choices[labels.indexOf(pickedLabel ?? "")];
			if (!choice) return;
			let text: string | undefined;
			if (choice.input) {
				const limits = `${choice.input.min_length}-${choice.input.max_length} characters`;
				text = await ctx.ui.input(choice.input.prompt, limits);
				if (text === undefined) return;
			}
			const result = await bridge.answer(decision, choice, text);
			ctx.ui.notify(result ? describe(result) : "piw-channels did not answer in time", result ? "info" : "error");
		},
	});
}
