/**
 * piw-channels for Pi: human decisions in this session, asked by the agent or answered here.
 *
 * On session start it spawns `piw-channels pi bridge` (or `$PIW_CHANNELS_BIN pi bridge`) and
 * talks to it in strict JSON lines (LF only; Node's readline is avoided because it also splits
 * on U+2028/U+2029). Each delivered decision is added to the session as a custom message with
 * no model turn, and its session entry id is reported back as proof of delivery. `/decision`
 * opens Pi's select and input dialogs and sends the answer with `source: "interactive"`: only
 * a person using these dialogs answers; the model has no tool to do so.
 *
 * The model asks with the `ask_human` tool (a person with `/ask`): the decision is bound to
 * this session, and its answer comes back as a follow-up message that starts a model turn.
 * That message carries the turn intent's id in `details`; the session is searched for it
 * before anything is sent, so a restart or `/reload` never delivers an answer twice.
 *
 * A run's notification for this session is shown as a message for the person (not sent to the
 * model, no turn), its row id in `details`, looked for in the branch before it is shown.
 * `/notify on` posts a long agent turn's progress and its end to the phone (the bridge writes
 * the notifications).
 *
 * Protocol (see adapters/pi/README.md):
 *   to the bridge:   hello (with the session file), delivered, answer, ask, turned, notified, post
 *   from the bridge: deliver, settle, result, asked, turn, notify, posted, error
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { constants as fsConstants, readlinkSync, realpathSync, statSync } from "node:fs";
import { access as fsAccess, mkdir as fsMkdir, open as fsOpen, writeFile as fsWriteFile } from "node:fs/promises";
import { homedir } from "node:os";
import { basename as pathBasename, dirname as pathDirname, join as pathJoin, resolve as pathResolve } from "node:path";
import type { Writable } from "node:stream";
import {
	type BashOperations,
	createBashToolDefinition,
	createEditToolDefinition,
	createGrepToolDefinition,
	createLocalBashOperations,
	createReadToolDefinition,
	createWriteToolDefinition,
	type EditOperations,
	type ExtensionAPI,
	type ExtensionContext,
	type GrepOperations,
	getAgentDir,
	getShellConfig,
	type ReadOperations,
	SettingsManager,
	type ToolDefinition,
	VERSION,
	type WriteOperations,
} from "@mariozechner/pi-coding-agent";
import { Box, Text } from "@mariozechner/pi-tui";
import { Type } from "typebox";

const CUSTOM_TYPE = "piw-channels-decision";
const TURN_TYPE = "piw-channels-answer";
const SETTLED_TYPE = "piw-channels-settled";
const GATE_STATE_TYPE = "piw-channels-gate";
const NOTE_TYPE = "piw-channels-notification";
const NOTIFY_STATE_TYPE = "piw-channels-notify";
const NOTIFY_AFTER_MS = 120_000; // `/notify on`: a turn longer than this is reported
const PROGRESS_EVERY_MS = 60_000; // at most one progress post a minute while a long turn runs
const PROGRESS_CHECK_MS = 15_000;
const FINAL_LINES = 6;
const FINAL_CHARS = 800;
const RESULT_TIMEOUT_MS = 15_000;
const STDERR_KEPT = 4096;
const IDLE_POLL_MS = 100;
const TURN_RETRY_MS = 10_000;
const TURN_RETRY_MAX_MS = 300_000;
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
const BACKOFF_RESET_MS = 30_000; // a bridge that ran this long starts the backoff over

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

interface Asked {
	type: "asked";
	event_id: string;
	decision_id: string;
	fingerprint?: string;
	delivered_to: string[];
}

interface Turn {
	type: "turn";
	turn_intent_id: string;
	decision_id: string;
	content: string;
	by_person?: boolean;
}

interface Notify {
	type: "notify";
	notification_id: string;
	kind: "progress" | "final";
	title: string | null;
	text: string;
	run_id: string;
}

interface Posted {
	type: "posted";
	event_id: string;
	notification_id: string;
	run_id: string;
	adopted: boolean;
	delivered_to: string[];
}

/** Where this session's own posts (`/notify on`) would go: the audience's Telegram routes. */
interface NotifyState {
	type: "notify_state";
	event_id: string;
	audience: string;
	delivered_to: string[];
	problem: string | null;
}

interface Settle {
	type: "settle";
	decision_id: string;
	outcome: string;
	provenance: string;
	text: string;
	title?: string;
	channel?: string | null;
	terminal?: boolean;
}

interface Gated {
	type: "gated";
	event_id: string;
	action: "allow" | "block" | "ask";
	reason: string | null;
	rule: string | null;
	ask_here?: boolean;
	fingerprint?: string;
	delivered_to?: string[];
	decision?: Deliver;
	sandbox?: Sandbox;
}

interface GateResult {
	type: "gate_result";
	event_id: string;
	decision_id: string;
	allow: boolean;
	choice: string | null;
	message: string;
}

interface GateState {
	type: "gate_state";
	event_id: string;
	enabled: boolean;
	problem: string | null;
	audience: string;
	timeout_minutes: number;
	file: string;
	allowed: string[];
	sandbox?: string;
}

interface Failure {
	type: "error";
	code: string;
	message: string;
	event_id?: string;
}

type Inbound =
	| Deliver
	| Result
	| Asked
	| Turn
	| Notify
	| Posted
	| NotifyState
	| Settle
	| Gated
	| GateResult
	| GateState
	| Failure;

type Reply = Result | Asked | Gated | GateState | Posted | NotifyState | Failure;

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

/** "Approve the plan?: Accepted: Ship (answered on telegram:default)". */
function settleNotice(settle: Settle): string {
	const line = settle.text.split("\n")[0] ?? settle.text;
	let where = "";
	if (settle.channel === "pi") where = settle.terminal ? " (answered in the terminal)" : " (answered in Pi)";
	else if (settle.channel) where = ` (answered on ${settle.channel})`;
	else if (settle.provenance === "explicit_cancel") where = " (cancelled with piw-channels cancel)";
	else if (settle.provenance === "expired_no_default") where = " (its deadline passed)";
	return settle.title ? `${settle.title}: ${line}${where}` : `${line}${where}`;
}

function describe(reply: Reply): string {
	if (reply.type !== "result") return `Rejected: ${reply.type === "error" ? reply.message : "unexpected reply"}`;
	const winner = reply.label ?? reply.choice ?? reply.reason ?? "";
	switch (reply.result) {
		case "won":
		case "adopted":
			return `Accepted: ${winner}`;
		case "already_resolved":
			return `Already decided: ${reply.outcome === "accepted" ? winner : `cancelled (${winner})`}`;
		case "stale":
			return `Stale: ${reply.message}`;
		default:
			return `Rejected: ${reply.message}`;
	}
}

/** One bridge child for one session. */
class Bridge {
	readonly open = new Map<string, Deliver>();
	private readonly queue: Deliver[] = [];
	private readonly turns: Turn[] = [];
	private readonly notes: Notify[] = [];
	private readonly settled: { decision_id: string; notice: string }[] = [];
	/** Open `/decision` dialogs by decision: closed when the decision is settled elsewhere. */
	readonly dialogs = new Map<string, { controller: AbortController; settledBy?: string }>();
	/** Decisions of gated calls: their outcome is told where the call waits, not as a notice. */
	readonly gating = new Set<string>();
	private turnSent: { id: string; at: number } | undefined;
	/** The last agent run ended with Escape: waiting answers do not start a new turn. */
	stoppedByPerson = false;
	private turnRetryMs = TURN_RETRY_MS;
	private readonly waiting = new Map<string, (reply: Reply) => void>();
	/** Gated calls waiting for their decision, and results that came before their waiter. */
	private readonly gateWaiters = new Map<string, (result: GateResult) => void>();
	private readonly gateResults = new Map<string, GateResult>();
	private buffer = Buffer.alloc(0);
	private stderr = "";
	private timer: ReturnType<typeof setTimeout> | undefined;
	private stopped = false;
	private gone = false;
	private readonly child: ChildProcessWithoutNullStreams;
	private readonly secretPipe: Writable;

	constructor(
		private readonly pi: ExtensionAPI,
		private ctx: ExtensionContext,
		private readonly onExit: (notice: string, permanent: boolean) => void,
	) {
		const bin = process.env.PIW_CHANNELS_BIN || "piw-channels";
		// The secret goes on an extra pipe (fd 3), never in argv or the environment; the bridge
		// believes only a pipe whose write end its parent (this Pi) holds, and only a hello that
		// repeats the secret. The write end stays open for as long as the bridge runs.
		const secret = randomBytes(32).toString("hex");
		// PIW_PI_WINDOW names this Pi process: the session's lease belongs to this window while
		// it lives (a /reload's next bridge takes it over; another window waits).
		this.child = spawn(bin, ["pi", "bridge", "--secret-fd", "3"], {
			stdio: ["pipe", "pipe", "pipe", "pipe"],
			env: { ...process.env, PIW_PI_WINDOW: String(process.pid) },
		}) as ChildProcessWithoutNullStreams;
		this.secretPipe = this.child.stdio[3] as Writable;
		this.secretPipe.on("error", () => undefined);
		this.secretPipe.write(`${secret}\n`);
		this.child.on("error", (error: NodeJS.ErrnoException) => {
			const missing = error.code === "ENOENT";
			this.exited(
				missing
					? `piw-channels bridge: ${bin} was not found; install piw-channels so that it is on PATH, or set PIW_CHANNELS_BIN to its full path`
					: `piw-channels bridge: ${error.message}`,
				missing,
			);
		});
		// 65, 77, 78: the database, its permissions or the config need a fix; a restart cannot help.
		this.child.on("close", (code) => this.exited(exitNotice(code, this.stderr), [65, 77, 78].includes(code ?? -1)));
		this.child.stdin.on("error", () => undefined); // the child is gone; "close" reports it
		this.child.stdout.on("data", (chunk: Buffer) => this.receive(chunk));
		// Keep the pipe drained, and the end of what it said: a bridge that cannot start prints
		// the fix there (for example `chmod 700 ...`).
		this.child.stderr.on("data", (chunk: Buffer) => {
			this.stderr = (this.stderr + chunk.toString("utf8")).slice(-STDERR_KEPT);
		});
		this.send({
			type: "hello",
			secret,
			session_id: ctx.sessionManager.getSessionId(),
			// The bridge checks it: a written file's header must name this session; null for a
			// session kept in memory (`--no-session`).
			session_file: ctx.sessionManager.getSessionFile() ?? null,
			pi_version: piVersion(),
			mode: piMode(ctx),
		});
	}

	/** The child is gone (or never started): fail what waits on it, and tell the supervisor. */
	private exited(notice: string, permanent = false): void {
		if (this.gone) return;
		this.gone = true;
		for (const [eventId, waiter] of [...this.waiting]) {
			this.waiting.delete(eventId);
			waiter({ type: "error", code: "bridge_down", message: "the piw-channels bridge stopped", event_id: eventId });
		}
		for (const [decisionId, waiter] of [...this.gateWaiters]) {
			this.gateWaiters.delete(decisionId);
			waiter({
				type: "gate_result",
				event_id: "",
				decision_id: decisionId,
				allow: false,
				choice: null,
				message: "Denied: the piw-channels bridge stopped before an answer came",
			});
		}
		if (this.timer) clearTimeout(this.timer);
		this.secretPipe.destroy();
		if (!this.stopped) this.onExit(notice, permanent);
	}

	stop(reason?: string): void {
		// Why Pi stops ("quit", "reload", "new", ...): only a reload keeps the lease in this window.
		if (reason) this.send({ type: "bye", reason });
		this.stopped = true;
		if (this.timer) clearTimeout(this.timer);
		this.child.stdin.end(); // the bridge releases its lease when stdin closes
		this.secretPipe.end();
	}

	send(message: Record<string, unknown>): void {
		if (!this.stopped) this.child.stdin.write(`${JSON.stringify(message)}\n`);
	}

	/** Send a line that names an event, and wait for the reply to it (undefined: no reply in time). */
	request(message: Record<string, unknown> & { event_id: string }): Promise<Reply | undefined> {
		const eventId = message.event_id;
		return new Promise((resolve) => {
			const timer = setTimeout(() => {
				this.waiting.delete(eventId);
				resolve(undefined);
			}, RESULT_TIMEOUT_MS);
			this.waiting.set(eventId, (reply) => {
				clearTimeout(timer);
				resolve(reply);
			});
			this.send(message);
		});
	}

	/** Send an answer and wait for its result. */
	answer(decision: Deliver, choice: Choice, text: string | undefined): Promise<Reply | undefined> {
		// "ui." marks an answer from this extension's dialogs; the dot also keeps the stored key
		// `<session uuid>:ui.<uuid>` from looking like a Bot API token (`<digits>:<secret>`).
		return this.request({
			type: "answer",
			decision_id: decision.decision_id,
			request_digest: decision.request_digest,
			choice: choice.id,
			input: text ?? null,
			event_id: `ui.${randomUUID()}`,
			source: "interactive",
		});
	}

	/** Ask the bridge to judge a tool call (and to open its decision when a person must say). */
	gate(call: Record<string, unknown>): Promise<Reply | undefined> {
		return this.request({ ...call, type: "gate", event_id: `gate.${randomUUID()}` });
	}

	/** The policy's state and this session's allowed inputs, for `/gate`. */
	gateState(): Promise<Reply | undefined> {
		return this.request({ type: "gate_state", event_id: `state.${randomUUID()}` });
	}

	/** The first answer to a gated call's decision (the bridge applies its deadline). */
	waitGate(decisionId: string): Promise<GateResult> {
		const early = this.gateResults.get(decisionId);
		if (early) {
			this.gateResults.delete(decisionId);
			return Promise.resolve(early);
		}
		return new Promise((resolve) => this.gateWaiters.set(decisionId, resolve));
	}

	/** Open a decision bound to this session; the answer comes back as a turn. */
	ask(question: Record<string, unknown>): Promise<Reply | undefined> {
		return this.request({ ...question, type: "ask", event_id: `ask.${randomUUID()}` });
	}

	/**
	 * Show queued decisions and answers once Pi is idle (a message sent mid-turn would steer
	 * the model). Pi turns idle only after the `agent_end` listeners return, so while anything
	 * waits this looks again shortly instead of waiting for the next event.
	 */
	pump(ctx?: ExtensionContext): void {
		if (ctx) this.ctx = ctx;
		if (this.stopped) return;
		this.reportTurns();
		if (this.queue.length === 0 && this.turns.length === 0 && this.settled.length === 0 && this.notes.length === 0) return;
		if (this.ctx.isIdle() && this.turnSent === undefined) {
			this.showDecisions();
			this.showSettled();
			this.showNotes();
			this.startTurn();
		} else if (this.turnSent && this.ctx.isIdle() && Date.now() - this.turnSent.at > this.turnRetryMs) {
			// Idle, and the answer never reached the session (the turn could not start, for
			// example with no model): try again, less and less often, saying so once.
			if (this.turnRetryMs === TURN_RETRY_MS) {
				this.notify("piw-channels: an answer could not start a model turn; it will be tried again", "warning");
			}
			this.turnRetryMs = Math.min(this.turnRetryMs * 2, TURN_RETRY_MAX_MS);
			this.turnSent = undefined;
		}
		if (this.queue.length > 0 || this.turns.length > 0 || this.settled.length > 0 || this.notes.length > 0) {
			this.timer ??= setTimeout(() => {
				this.timer = undefined;
				this.pump();
			}, IDLE_POLL_MS);
		}
	}

	private showDecisions(): void {
		while (this.queue.length > 0) {
			const item = this.queue.shift() as Deliver;
			if (!this.open.has(item.decision_id)) continue; // settled while it waited
			let entryId = this.findEntry(CUSTOM_TYPE, "messageId", item.message_id);
			if (entryId === undefined) {
				this.pi.sendMessage({
					customType: CUSTOM_TYPE,
					content: `${item.text}\n\nAnswer with /decision`,
					display: true,
					details: { messageId: item.message_id, decisionId: item.decision_id },
				});
				entryId = this.findEntry(CUSTOM_TYPE, "messageId", item.message_id);
			}
			if (entryId !== undefined) this.send({ type: "delivered", message_id: item.message_id, entry_id: entryId });
		}
	}

	/** Show each run's notification once: the branch is searched for its id first (a bridge
	 * started again offers it again), and the receipt says whether it was found there. */
	private showNotes(): void {
		while (this.notes.length > 0) {
			const item = this.notes.shift() as Notify;
			let entryId = this.findEntry(NOTE_TYPE, "notificationId", item.notification_id);
			const adopted = entryId !== undefined;
			if (entryId === undefined) {
				const head = `${item.kind === "final" ? "Finished" : "In progress"}${item.title ? `: ${item.title}` : ""}`;
				this.pi.sendMessage({
					customType: NOTE_TYPE,
					content: `${head}\n\n${item.text}`,
					display: true,
					details: { notificationId: item.notification_id, runId: item.run_id, kind: item.kind },
				});
				entryId = this.findEntry(NOTE_TYPE, "notificationId", item.notification_id);
			}
			if (entryId !== undefined) {
				this.send({ type: "notified", notification_id: item.notification_id, entry_id: entryId, adopted });
			}
		}
	}

	/** Post this session's own notification (`/notify on`); the reply names its run. */
	post(kind: "progress" | "final", text: string, runId: string | undefined, ctx: ExtensionContext): Promise<Reply | undefined> {
		return this.request({
			type: "post",
			event_id: `post.${randomUUID()}`,
			kind,
			text,
			run_id: runId ?? null,
			session_name: sessionName(ctx) ?? null,
			cwd: ctx.cwd,
		});
	}

	/** Where this session's own notifications would go, for `/notify on`. */
	notifyState(): Promise<Reply | undefined> {
		return this.request({ type: "notify_state", event_id: `notes.${randomUUID()}` });
	}

	/** Mark decisions shown here as decided, in the session itself (the message that asked
	 * "Answer with /decision" cannot be edited). */
	private showSettled(): void {
		while (this.settled.length > 0) {
			const item = this.settled.shift() as { decision_id: string; notice: string };
			if (this.findEntry(SETTLED_TYPE, "settledDecisionId", item.decision_id) !== undefined) continue;
			this.pi.sendMessage({
				customType: SETTLED_TYPE,
				content: `Decided: ${item.notice}. Nothing to answer any more.`,
				display: true,
				details: { settledDecisionId: item.decision_id },
			});
		}
	}

	/** Start the model turn of the first waiting answer (one at a time: each starts a turn). */
	private startTurn(): void {
		const next = this.turns[0];
		if (!next) return;
		this.turnSent = { id: next.turn_intent_id, at: Date.now() };
		// After Escape the person stopped the agent: the answer joins the session without
		// starting a turn, and reaches the model with the person's next message.
		const held = this.stoppedByPerson;
		this.pi.sendMessage(
			{
				customType: TURN_TYPE,
				content: next.content,
				display: true,
				details: { turnIntentId: next.turn_intent_id, decisionId: next.decision_id, byPerson: next.by_person === true },
			},
			held ? {} : { deliverAs: "followUp", triggerTurn: true },
		);
	}

	/** Report every waiting answer that is already in the session (the receipt is its entry id). */
	private reportTurns(): void {
		while (this.turns.length > 0) {
			const first = this.turns[0] as Turn;
			const entryId = this.findEntry(TURN_TYPE, "turnIntentId", first.turn_intent_id);
			if (entryId === undefined) return;
			this.send({ type: "turned", turn_intent_id: first.turn_intent_id, entry_id: entryId });
			this.turns.shift();
			if (this.turnSent?.id === first.turn_intent_id) {
				this.turnSent = undefined;
				this.turnRetryMs = TURN_RETRY_MS;
			}
		}
	}

	/** The entry of ours that carries this id (a restarted bridge may send it again). */
	private findEntry(
		customType: string,
		key: "messageId" | "turnIntentId" | "settledDecisionId" | "decisionId" | "notificationId",
		id: string,
	): string | undefined {
		const branch = this.ctx.sessionManager.getBranch();
		for (let i = branch.length - 1; i >= 0; i--) {
			const entry = branch[i] as { type: string; id: string; customType?: string; details?: Record<string, unknown> };
			if (entry.type === "custom_message" && entry.customType === customType && entry.details?.[key] === id) {
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
				this.showOpen();
				this.pump();
				break;
			case "settle": {
				const shown = this.open.get(message.decision_id);
				this.open.delete(message.decision_id);
				this.showOpen();
				const waiting = this.queue.findIndex((item) => item.decision_id === message.decision_id);
				if (waiting >= 0) this.queue.splice(waiting, 1);
				const notice = settleNotice(message);
				const dialog = this.dialogs.get(message.decision_id);
				if (dialog) {
					// Someone else decided while the person had the dialog open: close it.
					dialog.settledBy = notice;
					dialog.controller.abort();
				} else if (!this.gating.delete(message.decision_id)) {
					this.notify(notice, "info");
				}
				if ((shown && this.findEntry(CUSTOM_TYPE, "messageId", shown.message_id) !== undefined) ||
					(!shown && this.findEntry(CUSTOM_TYPE, "decisionId", message.decision_id) !== undefined)) {
					this.settled.push({ decision_id: message.decision_id, notice });
					this.pump();
				}
				break;
			}
			case "notify":
				if (!this.notes.some((note) => note.notification_id === message.notification_id)) this.notes.push(message);
				this.pump();
				break;
			case "turn":
				if (!this.turns.some((turn) => turn.turn_intent_id === message.turn_intent_id)) this.turns.push(message);
				this.pump();
				break;
			case "result":
			case "asked":
			case "gated":
			case "gate_state":
			case "posted":
			case "notify_state":
				this.reply(message.event_id, message);
				break;
			case "gate_result": {
				const waiter = this.gateWaiters.get(message.decision_id);
				this.gateWaiters.delete(message.decision_id);
				if (waiter) waiter(message);
				else this.gateResults.set(message.decision_id, message);
				break;
			}
			case "error":
				// An error naming an event answers that request (for example: another bridge still
				// serves this session); any other is news for the person.
				if (message.event_id !== undefined && this.waiting.has(message.event_id)) {
					this.reply(message.event_id, message);
					break;
				}
				this.notify(`piw-channels: ${message.message}`, message.code === "lease_held" ? "warning" : "error");
				break;
		}
	}

	private reply(eventId: string, message: Reply): void {
		const waiter = this.waiting.get(eventId);
		this.waiting.delete(eventId);
		waiter?.(message);
	}

	/** "1 decision waiting (/decision)" in the footer and above the editor, while any is open. */
	private showOpen(): void {
		if (!this.ctx.hasUI) return;
		const n = this.open.size;
		const text = n > 0 ? `${n} decision${n === 1 ? "" : "s"} waiting (/decision)` : undefined;
		this.ctx.ui.setStatus("piw-channels-open", text);
		this.ctx.ui.setWidget("piw-channels-open", text ? [text] : undefined);
	}

	private notify(text: string, kind: "info" | "warning" | "error"): void {
		if (this.ctx.hasUI) this.ctx.ui.notify(text, kind);
	}
}

const ChoiceParam = Type.Object({
	id: Type.String({ description: "Short id: a letter or _, then letters, digits, _ or -" }),
	label: Type.String({ description: "What the person sees" }),
	text_prompt: Type.Optional(
		Type.String({ description: "Set to ask the person for text with this choice: the prompt they see" }),
	),
	min_length: Type.Optional(Type.Integer({ description: "Fewest characters of text (default 1)" })),
	max_length: Type.Optional(Type.Integer({ description: "Most characters of text (default 4000)" })),
});

const AskParams = Type.Object({
	title: Type.String({ description: "The question, one line" }),
	summary: Type.Optional(Type.String({ description: "What the person should know to decide" })),
	blocks: Type.Optional(
		Type.Array(Type.Any(), {
			description: "Optional presentation blocks: {kind:'paragraph'|'preformatted', text}, {kind:'section', title}, {kind:'bullets', items}",
		}),
	),
	choices: Type.Array(ChoiceParam, { minItems: 1, description: "The answers the person can pick" }),
	timeout_minutes: Type.Optional(Type.Number({ description: "Give up after this long (default: wait)" })),
	default_choice: Type.Optional(Type.String({ description: "Choice id taken when the timeout passes" })),
	audience: Type.Optional(Type.String({ description: "Who decides (default: operator)" })),
});

function askedText(reply: Reply | undefined): { text: string; ok: boolean } {
	if (reply === undefined) return { text: "piw-channels did not answer in time; the question was not asked.", ok: false };
	if (reply.type === "asked") {
		return {
			text:
				`Asked the person: decision ${reply.fingerprint ?? reply.decision_id}, delivered to ${reply.delivered_to.join(", ")}. ` +
				"Their answer will arrive as a new message that starts your next turn; do not wait or poll for it. " +
				"End your turn now unless there is other work that does not depend on the answer.",
			ok: true,
		};
	}
	return { text: `The question was not asked: ${reply.type === "error" ? reply.message : reply.type}`, ok: false };
}

/** Choice ids from labels: lowercase words joined by "-", unique. */
function choiceIds(labels: string[]): { id: string; label: string }[] {
	const used = new Set<string>();
	return labels.map((label, i) => {
		let id = label.toLowerCase().replace(/[^a-z0-9_]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40);
		if (!/^[a-z_]/.test(id)) id = `c${i + 1}${id ? `-${id}` : ""}`;
		while (used.has(id)) id = `${id}-${i + 1}`;
		used.add(id);
		return { id, label };
	});
}

/** Keeps one bridge running for the session: restarts a bridge that died, with backoff. */
class Supervisor {
	bridge: Bridge | undefined;
	private restart: ReturnType<typeof setTimeout> | undefined;
	private failures = 0;
	private startedAt = 0;
	private downNotice: string | undefined;

	constructor(
		private readonly pi: ExtensionAPI,
		private ctx: ExtensionContext,
	) {
		this.start();
	}

	/** Why nothing can be shown or answered right now, or undefined while the bridge runs. */
	get down(): string | undefined {
		return this.bridge ? undefined : this.downNotice;
	}

	pump(ctx: ExtensionContext): void {
		this.ctx = ctx;
		this.bridge?.pump(ctx);
	}

	stop(reason?: string): void {
		if (this.restart) clearTimeout(this.restart);
		this.restart = undefined;
		this.bridge?.stop(reason);
		this.bridge = undefined;
	}

	private start(): void {
		this.restart = undefined;
		this.startedAt = Date.now();
		this.bridge = new Bridge(this.pi, this.ctx, (notice, permanent) => this.exited(notice, permanent));
		if (this.downNotice !== undefined) this.status(undefined);
	}

	private exited(notice: string, permanent: boolean): void {
		this.bridge = undefined;
		if (permanent) {
			this.downNotice = `${notice}; fix it, then /reload`;
			if (this.ctx.hasUI) this.ctx.ui.notify(this.downNotice, "error");
			this.status("piw-channels: bridge down");
			return;
		}
		if (Date.now() - this.startedAt > BACKOFF_RESET_MS) this.failures = 0;
		const delay = Math.min(BACKOFF_FIRST_MS * 2 ** this.failures, BACKOFF_MAX_MS);
		this.failures += 1;
		this.downNotice = `${notice}; restarting in ${Math.round(delay / 1000)} s`;
		if (this.ctx.hasUI) this.ctx.ui.notify(this.downNotice, "error");
		this.status("piw-channels: bridge down, restarting");
		this.restart = setTimeout(() => this.start(), delay);
	}

	private status(text: string | undefined): void {
		if (this.ctx.hasUI) this.ctx.ui.setStatus("piw-channels", text);
	}
}

/** The person's choice and text for one decision, or undefined when they cancel. */
async function pickAnswer(
	ctx: ExtensionContext,
	decision: Deliver,
	signal: AbortSignal,
): Promise<{ choice: Choice; text: string | undefined } | undefined> {
	const labels = decision.choices.map((c, i) => `${i + 1}. ${c.label}`);
	const pickedLabel = await ctx.ui.select(decision.title, labels, { signal });
	const choice = decision.choices[labels.indexOf(pickedLabel ?? "")];
	if (!choice || signal.aborted) return undefined;
	if (!choice.input) return { choice, text: undefined };
	const { min_length: min, max_length: max } = choice.input;
	// The limits go in the title: a placeholder disappears as soon as the person types.
	const title = `${choice.input.prompt} (${min}-${max} characters)`;
	for (;;) {
		const text = await ctx.ui.input(title, `${min}-${max} characters`, { signal });
		if (text === undefined || signal.aborted) return undefined;
		if (text.length >= min && text.length <= max) return { choice, text };
		// Too short (an empty answer included) or too long: say so and ask again.
		ctx.ui.notify(`The text needs ${min} to ${max} characters; it has ${text.length}.`, "warning");
	}
}

/** This session's `/gate on|off` (kept in the session, so it survives /reload), or undefined. */
function sessionGate(ctx: ExtensionContext): "on" | "off" | undefined {
	const branch = ctx.sessionManager.getBranch();
	for (let i = branch.length - 1; i >= 0; i--) {
		const entry = branch[i] as { type: string; customType?: string; data?: { gate?: unknown } };
		if (entry.type === "custom" && entry.customType === GATE_STATE_TYPE) {
			const gate = entry.data?.gate;
			return gate === "on" || gate === "off" ? gate : undefined;
		}
	}
	return undefined;
}

/** This session's `/notify` switch (kept in the session, so /reload and --continue keep it). */
function sessionNotify(ctx: ExtensionContext): { on: boolean; afterMs: number } {
	const branch = ctx.sessionManager.getBranch();
	for (let i = branch.length - 1; i >= 0; i--) {
		const entry = branch[i] as { type: string; customType?: string; data?: { notify?: unknown; afterMs?: unknown } };
		if (entry.type === "custom" && entry.customType === NOTIFY_STATE_TYPE) {
			const afterMs = typeof entry.data?.afterMs === "number" && entry.data.afterMs >= 0 ? entry.data.afterMs : NOTIFY_AFTER_MS;
			return { on: entry.data?.notify === "on", afterMs };
		}
	}
	return { on: false, afterMs: NOTIFY_AFTER_MS };
}

/** "90s", "2m", "1h" (a bare number is minutes) in ms, or undefined. */
function parseDuration(text: string): number | undefined {
	const found = /^(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?$/.exec(text.trim().toLowerCase());
	if (!found) return undefined;
	const unit = found[2] ?? "m";
	const scale = unit.startsWith("s") ? 1_000 : unit === "h" ? 3_600_000 : 60_000;
	return Math.round(Number(found[1]) * scale);
}

/** "2 min 10 s", "45 s", "1 h 5 min". */
function spoken(ms: number): string {
	const seconds = Math.max(0, Math.round(ms / 1000));
	if (seconds < 60) return `${seconds} s`;
	const minutes = Math.floor(seconds / 60);
	if (minutes < 60) return seconds % 60 ? `${minutes} min ${seconds % 60} s` : `${minutes} min`;
	return minutes % 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min` : `${Math.floor(minutes / 60)} h`;
}

/** The first lines of the agent's last reply, as a notification may carry them. */
function firstLines(message: unknown): string {
	const content = (message as { content?: unknown } | undefined)?.content;
	const text = typeof content === "string"
		? content
		: Array.isArray(content)
			? content.filter((part) => (part as { type?: string }).type === "text").map((part) => String((part as { text?: unknown }).text ?? "")).join("\n")
			: "";
	// Only tab and line feed pass: the notification refuses other control characters.
	const lines = text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, " ").split("\n").filter((line) => line.trim());
	let shown = lines.slice(0, FINAL_LINES).join("\n");
	if (lines.length > FINAL_LINES || shown.length > FINAL_CHARS) shown = `${shown.slice(0, FINAL_CHARS).trimEnd()}…`;
	return shown || "(the agent's last message has no text)";
}

/** The session's name when the person gave it one, else undefined (the bridge uses the id). */
function sessionName(ctx: ExtensionContext): string | undefined {
	const manager = ctx.sessionManager as unknown as { getSessionName?: () => string | undefined };
	try {
		return manager.getSessionName?.() || undefined;
	} catch {
		return undefined;
	}
}

/** The person's answer to a gated call in Pi's own dialog (closed when it is decided elsewhere). */
async function gateDialog(ctx: ExtensionContext, bridge: Bridge, decision: Deliver, signal: AbortSignal,
	onDismiss: () => void): Promise<boolean> {
	// The dialog shows the whole card (the command, the fields, who asks), not only its title.
	const card = decision.text
		.split("\n\n")
		.filter((segment) => !segment.startsWith("Choices\n"))
		.join("\n\n");
	const picked = await pickAnswer(ctx, { ...decision, title: card }, signal);
	if (signal.aborted) return false;
	if (!picked) {
		onDismiss(); // Escape in the dialog: the person does not want it to run
		return true;
	}
	const result = await bridge.answer(decision, picked.choice, picked.text);
	if (result?.type === "result" && !["won", "adopted", "already_resolved"].includes(result.result)) {
		ctx.ui.notify(describe(result), "warning");
	}
	return true;
}

// -- The sandbox and the fence (channels/gate/confinement.py computes both) ------------------
//
// The bridge sends, with every call it lets run, where that call may run: bubblewrap's
// arguments for bash (or why there are none) and the fence for the tools that run inside Pi.
// The fence is applied when a tool runs, links resolved at that moment: read opens the file
// first and checks what it opened; write and edit check the place they write.

interface Fence {
	mounts: [string, string][]; // [path, rw|ro|ro-empty|hidden|hidden-file], parents first
	secret: string[]; // never read or searched: the state, the configuration, the tokens
	protected: string[]; // never written by a tool, whoever allowed it
}

interface Sandbox {
	mode: "auto" | "require" | "off";
	argv: string[] | null;
	problem: string | null;
	fence: Fence;
}

interface Confined {
	sandbox: Sandbox;
	asked: boolean; // a person allowed this very call (a write outside may then go ahead)
}

/** Shared by every load of this file in the process (a /reload keeps the calls judged before it). */
const confinements: Map<string, Confined> = (() => {
	const store = globalThis as unknown as Record<symbol, Map<string, Confined> | undefined>;
	const key = Symbol.for("piw-channels.confinements");
	store[key] ??= new Map<string, Confined>();
	return store[key] as Map<string, Confined>;
})();

function within(path: string, directory: string): boolean {
	return path === directory || path.startsWith(directory.endsWith("/") ? directory : `${directory}/`);
}

/** What the sandbox makes of `path`: the deepest mount that holds it (the root is read-only). */
function mountOf(fence: Fence, path: string): string {
	let found = "ro";
	for (const [place, kind] of fence.mounts) if (within(path, place)) found = kind;
	return found;
}

/** A tool's path as Pi resolves it (`@`, `~`, relative to the working directory). */
function toolPath(text: string, cwd: string): string {
	const plain = (text.startsWith("@") ? text.slice(1) : text).replace(/[\u00a0\u2000-\u200a\u202f\u205f\u3000]/g, " ");
	const expanded = plain === "~" ? homedir() : plain.startsWith("~/") ? homedir() + plain.slice(1) : plain;
	return pathResolve(cwd, expanded);
}

/** Where `path` leads now: its links resolved, the part that does not exist yet kept as written. */
function realTarget(path: string): string {
	let head = path;
	const rest: string[] = [];
	for (;;) {
		try {
			return pathJoin(realpathSync(head), ...rest.reverse());
		} catch {
			const parent = pathDirname(head);
			if (parent === head) return path;
			rest.push(pathBasename(head));
			head = parent;
		}
	}
}

function secretHit(fence: Fence, real: string): boolean {
	return fence.secret.some((place) => within(real, place)) || ["hidden", "hidden-file"].includes(mountOf(fence, real));
}

function fenceRead(confined: Confined, real: string, shown: string): void {
	if (secretHit(confined.sandbox.fence, real)) {
		throw new Error(`Blocked: ${shown} leads to piw-channels' state, configuration or a token (${real}); the agent may not read it.`);
	}
}

function fenceWrite(confined: Confined, real: string, shown: string): void {
	const fence = confined.sandbox.fence;
	if (secretHit(fence, real) || fence.protected.some((place) => within(real, place))) {
		throw new Error(`Blocked: ${shown} leads to ${real}, which the agent may not change (piw-channels' state, configuration, tokens, or Pi's settings and extensions).`);
	}
	if (fence.mounts.length > 0 && !confined.asked && mountOf(fence, real) !== "rw") {
		throw new Error(`Blocked: ${shown} leads to ${real}, outside what the agent may change (the project, /tmp and the policy's sandboxWritable).`);
	}
}

/** The call's confinement, taken once: a call the gate did not judge does not run. */
function takeConfined(toolCallId: string, tool: string): Confined {
	const confined = confinements.get(toolCallId);
	confinements.delete(toolCallId);
	if (!confined) throw new Error(`Blocked: this ${tool} call was not judged by the piw-channels gate, so it does not run.`);
	return confined;
}

function shellQuote(word: string): string {
	return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The same shell and settings as Pi's own bash; inside bubblewrap when the call has a sandbox. */
function sandboxedBash(confined: Confined, cwd: string): ToolDefinition {
	const settings = SettingsManager.create(cwd, getAgentDir());
	const shellPath = settings.getShellPath();
	const local = createLocalBashOperations({ shellPath });
	const argv = confined.sandbox.argv;
	if (!argv) return createBashToolDefinition(cwd, { operations: local, shellPath, commandPrefix: settings.getShellCommandPrefix() }) as unknown as ToolDefinition;
	const { shell, args } = getShellConfig(shellPath);
	const operations: BashOperations = {
		// `exec`: bubblewrap takes the shell's place, so Pi's timeout and Escape, which kill the
		// process group, kill it; --die-with-parent then ends everything inside.
		exec: (command, dir, options) =>
			local.exec(`exec ${[...argv, "--chdir", dir, "--", shell, ...args, command].map(shellQuote).join(" ")}`, dir, options),
	};
	return createBashToolDefinition(cwd, { operations, shellPath, commandPrefix: settings.getShellCommandPrefix() }) as unknown as ToolDefinition;
}

const IMAGE_MAGIC: [string, number[]][] = [
	["image/png", [0x89, 0x50, 0x4e, 0x47]],
	["image/jpeg", [0xff, 0xd8, 0xff]],
	["image/gif", [0x47, 0x49, 0x46, 0x38]],
];

function imageType(head: Buffer): string | null {
	for (const [mime, magic] of IMAGE_MAGIC) if (magic.every((byte, i) => head[i] === byte)) return mime;
	const webp = head.subarray(0, 4).toString("latin1") === "RIFF" && head.subarray(8, 12).toString("latin1") === "WEBP";
	return webp ? "image/webp" : null;
}

/** Open, then check the file actually opened (/proc/self/fd): a link swapped after the check cannot lead elsewhere. */
async function fencedOpen(confined: Confined, path: string): Promise<Buffer> {
	const handle = await fsOpen(path, "r");
	try {
		let real = realTarget(path);
		try {
			real = readlinkSync(`/proc/self/fd/${handle.fd}`);
		} catch {
			// no /proc (macOS): the path as resolved a moment ago
		}
		fenceRead(confined, real, path);
		return await handle.readFile();
	} finally {
		await handle.close();
	}
}

/** A tool's definition: Pi's own, and when `confined` is given, held to that call's fence. */
type Define = (cwd: string, confined?: Confined, params?: Record<string, unknown>) => ToolDefinition;

const writer = (confined: Confined): WriteOperations => ({
	writeFile: async (path: string, content: string) => {
		const real = realTarget(path);
		fenceWrite(confined, real, path);
		await fsWriteFile(real, content, "utf-8");
	},
	mkdir: async (dir: string) => {
		fenceWrite(confined, realTarget(dir), dir);
		await fsMkdir(dir, { recursive: true });
	},
});

const FENCED: [string, Define][] = [
	["bash", (cwd, confined) => (confined ? sandboxedBash(confined, cwd) : (createBashToolDefinition(cwd) as unknown as ToolDefinition))],
	[
		"read",
		(cwd, confined) => {
			const operations: ReadOperations | undefined = confined && {
				readFile: (path) => fencedOpen(confined, path),
				access: (path) => fsAccess(path, fsConstants.R_OK),
				detectImageMimeType: async (path) => imageType((await fencedOpen(confined, path)).subarray(0, 16)),
			};
			return createReadToolDefinition(cwd, { operations }) as unknown as ToolDefinition;
		},
	],
	["write", (cwd, confined) => createWriteToolDefinition(cwd, { operations: confined && writer(confined) }) as unknown as ToolDefinition],
	[
		"edit",
		(cwd, confined) => {
			const operations: EditOperations | undefined = confined && {
				readFile: (path) => fencedOpen(confined, path),
				writeFile: writer(confined).writeFile,
				access: (path) => fsAccess(path, fsConstants.R_OK | fsConstants.W_OK),
			};
			return createEditToolDefinition(cwd, { operations }) as unknown as ToolDefinition;
		},
	],
	[
		"grep",
		(cwd, confined, params) => {
			if (confined) {
				const wanted = typeof params?.path === "string" ? params.path : ".";
				const root = realTarget(toolPath(wanted, cwd));
				fenceRead(confined, root, wanted);
				// ripgrep walks the tree itself: one that holds the state, the configuration or a
				// token is refused whole (bash's grep, in the sandbox, may search it: it sees them empty).
				const inside = confined.sandbox.fence.secret.find((place) => within(place, root));
				if (inside) throw new Error(`Blocked: ${wanted} holds ${inside} (piw-channels' state, configuration or a token); search a narrower directory.`);
			}
			const operations: GrepOperations | undefined = confined && {
				isDirectory: (path) => statSync(path).isDirectory(),
				readFile: async (path) => (await fencedOpen(confined, path)).toString("utf-8"),
			};
			return createGrepToolDefinition(cwd, { operations }) as unknown as ToolDefinition;
		},
	],
];

/** Pi's bash, read, write, edit and grep, each run as its call's confinement says. */
function fencedTools(pi: ExtensionAPI): void {
	for (const [name, define] of FENCED) {
		pi.registerTool({
			...define(process.cwd()),
			async execute(id, params, signal, onUpdate, ctx) {
				const confined = takeConfined(id, name);
				return define(ctx.cwd, confined, params as Record<string, unknown>).execute(id, params, signal, onUpdate, ctx);
			},
		});
	}
}

export default function piwChannels(pi: ExtensionAPI): void {
	let supervisor: Supervisor | undefined;
	const running = (): Bridge | undefined => supervisor?.bridge;
	const downText = (): string => supervisor?.down ?? "piw-channels is not running in this session";
	/** What the model is told with an allowed call's result ("Allowed on Telegram"). */
	const notes = new Map<string, string>();
	let gatesWaiting = 0;
	const showWaiting = (ctx: ExtensionContext, change: number): void => {
		gatesWaiting += change;
		if (!ctx.hasUI) return;
		const text = gatesWaiting > 0
			? `${gatesWaiting} decision${gatesWaiting === 1 ? "" : "s"} waiting (/decision)`
			: undefined;
		ctx.ui.setStatus("piw-channels-gate", text);
		ctx.ui.setWidget("piw-channels-gate", text ? [text] : undefined);
	};

	pi.on("session_start", async (_event, ctx) => {
		supervisor?.stop();
		supervisor = new Supervisor(pi, ctx);
		// One line when the agent's bash runs without the sandbox here (what holds instead).
		const bridge = supervisor.bridge;
		void bridge
			?.gateState()
			.then((state) => {
				if (state?.type === "gate_state" && state.sandbox && !state.sandbox.startsWith("sandbox: on")) {
					ctx.ui.notify(`piw-channels ${state.sandbox}`, "warning");
				}
			})
			.catch(() => undefined);
	});

	fencedTools(pi);

	// The gate: every tool call is judged by the bridge against the policy (and the guard);
	// one that needs a person waits here for the first answer, from Telegram or Pi's dialog.
	pi.on("tool_call", async (event, ctx) => {
		if (event.toolName === "ask_human") return undefined; // it asks a person already
		const bridge = running();
		if (!bridge) {
			return { block: true, reason: `Blocked: the piw-channels gate cannot judge this call (${downText()})` };
		}
		const reply = await bridge.gate({
			tool: event.toolName,
			input: event.input,
			cwd: ctx.cwd,
			session_name: sessionName(ctx) ?? null,
			ui: ctx.hasUI,
			session_gate: sessionGate(ctx) ?? null,
		});
		if (reply === undefined || reply.type !== "gated") {
			const why = reply === undefined ? "piw-channels did not answer in time" : reply.type === "error" ? reply.message : reply.type;
			return { block: true, reason: `Blocked: the piw-channels gate could not judge this call (${why})` };
		}
		if (reply.action === "allow") {
			if (!reply.sandbox) return { block: true, reason: "Blocked: the piw-channels gate did not say where this call may run" };
			confinements.set(event.toolCallId, { sandbox: reply.sandbox, asked: false });
			if (reply.reason) notes.set(event.toolCallId, reply.reason);
			return undefined;
		}
		if (reply.action === "block" || !reply.decision) {
			return { block: true, reason: reply.reason ?? "Blocked by the piw-channels gate" };
		}
		const decision = reply.decision;
		const closer = new AbortController();
		const cancel = (): void => bridge.send({ type: "gate_cancel", event_id: `cancel.${randomUUID()}`, decision_id: decision.decision_id });
		ctx.signal?.addEventListener("abort", cancel, { once: true });
		let answeredHere = false;
		const asking = reply.ask_here === true && ctx.hasUI;
		bridge.gating.add(decision.decision_id);
		showWaiting(ctx, 1);
		try {
			if (asking) {
				void gateDialog(ctx, bridge, decision, closer.signal, cancel)
					.then((here) => {
						answeredHere = here;
					})
					.catch(() => undefined);
			}
			const result = await bridge.waitGate(decision.decision_id);
			// Decided elsewhere (Telegram, the terminal, the deadline): the dialog closes, saying so.
			if (asking && !answeredHere) ctx.ui.notify(`${decision.title}: ${result.message}`, "info");
			if (result.allow) {
				if (!reply.sandbox) return { block: true, reason: "Blocked: the piw-channels gate did not say where this call may run" };
				confinements.set(event.toolCallId, { sandbox: reply.sandbox, asked: true });
				notes.set(event.toolCallId, result.message);
				return undefined;
			}
			return { block: true, reason: result.message };
		} finally {
			closer.abort();
			ctx.signal?.removeEventListener("abort", cancel);
			showWaiting(ctx, -1);
		}
	});

	// An allowed call's result says who allowed it.
	pi.on("tool_result", async (event) => {
		confinements.delete(event.toolCallId); // a call another extension blocked never ran
		const note = notes.get(event.toolCallId);
		if (note === undefined) return undefined;
		notes.delete(event.toolCallId);
		return { content: [{ type: "text" as const, text: `[${note}]` }, ...event.content] };
	});

	// Decision cards, "Decided" markers and notifications are for the person: the model sees
	// only answers.
	const personOnly = new Set([CUSTOM_TYPE, SETTLED_TYPE, NOTE_TYPE]);
	pi.on("context", async (event) => ({
		messages: event.messages.filter((message) => {
			const custom = message as { role?: string; customType?: string };
			return !(custom.role === "custom" && personOnly.has(custom.customType ?? ""));
		}),
	}));

	pi.registerCommand("gate", {
		description: "Show the tool-call gate (policy, this session's allowed inputs); /gate on|off for this session",
		handler: async (args, ctx) => {
			const wanted = args.trim().toLowerCase();
			if (wanted === "on" || wanted === "off" || wanted === "default") {
				pi.appendEntry(GATE_STATE_TYPE, { gate: wanted === "default" ? null : wanted });
				ctx.ui.notify(
					wanted === "default" ? "piw-channels gate: this session follows the policy again" : `piw-channels gate: ${wanted} for this session`,
					"info",
				);
				return;
			}
			if (wanted) {
				ctx.ui.notify("Usage: /gate, /gate on, /gate off, /gate default", "warning");
				return;
			}
			const bridge = running();
			const state = bridge ? await bridge.gateState() : undefined;
			if (!state || state.type !== "gate_state") {
				ctx.ui.notify(`piw-channels gate: ${state?.type === "error" ? state.message : downText()}`, "error");
				return;
			}
			const override = sessionGate(ctx);
			const lines = [
				state.problem
					? `piw-channels gate: the policy cannot be read (${state.problem}); calls it would ask about are denied`
					: `piw-channels gate: ${state.enabled ? "on" : "off"} in ${state.file} (audience ${state.audience}, answers within ${state.timeout_minutes} min or denied)`,
				override ? `This session: ${override} (/gate default follows the policy)` : "This session: follows the policy",
				state.sandbox ?? "sandbox: unknown (an older bridge)",
				state.allowed.length > 0 ? `Allowed for this session:\n${state.allowed.map((line) => `  ${line}`).join("\n")}` : "Allowed for this session: nothing",
			];
			ctx.ui.notify(lines.join("\n"), "info");
		},
	});

	/** Why this session's posts would reach no phone (undefined: they would, or the bridge cannot say). */
	const nowhere = async (): Promise<string | undefined> => {
		const bridge = running();
		const state = bridge ? await bridge.notifyState() : undefined;
		if (state?.type !== "notify_state" || state.delivered_to.length > 0) return undefined;
		return state.problem
			? `the configuration cannot be read (${state.problem}), so nothing reaches the phone until it is fixed`
			: `audience ${state.audience} has no Telegram route, so nothing reaches the phone (set one up: piw-channels setup telegram)`;
	};

	pi.registerCommand("notify", {
		description: "/notify on [2m] | off: post this session's agent turns longer than 2 min to the phone (progress, then the end)",
		handler: async (args, ctx) => {
			const [wanted = "", after] = args.trim().toLowerCase().split(/\s+/);
			if (wanted === "on" || wanted === "off") {
				const afterMs = after === undefined ? NOTIFY_AFTER_MS : parseDuration(after);
				if (afterMs === undefined) {
					ctx.ui.notify("Usage: /notify on [AFTER, for example 90s, 5m], /notify off", "warning");
					return;
				}
				pi.appendEntry(NOTIFY_STATE_TYPE, { notify: wanted, afterMs });
				const unheard = wanted === "on" ? await nowhere() : undefined;
				if (unheard) {
					ctx.ui.notify(`piw-channels notify: on for this session, but ${unheard}`, "warning");
					return;
				}
				ctx.ui.notify(
					wanted === "on"
						? `piw-channels notify: on for this session (agent turns longer than ${spoken(afterMs)} are posted)`
						: "piw-channels notify: off for this session",
					"info",
				);
				return;
			}
			if (wanted) {
				ctx.ui.notify("Usage: /notify on [AFTER, for example 90s, 5m], /notify off", "warning");
				return;
			}
			const state = sessionNotify(ctx);
			ctx.ui.notify(state.on ? `piw-channels notify: on (agent turns longer than ${spoken(state.afterMs)})` : "piw-channels notify: off (/notify on)", "info");
		},
	});

	// `/notify on`: a long agent turn is posted as it runs (progress) and when it ends (final),
	// in one run, so the phone shows one status card and then the result. Posts go one after
	// another: the first one's reply names the run the later ones join.
	let turn: { startedAt: number; toolCalls: number; runId?: string; lastProgressAt?: number; chain: Promise<void>; timer?: ReturnType<typeof setInterval> } | undefined;
	const postInTurn = (current: NonNullable<typeof turn>, kind: "progress" | "final", text: string, ctx: ExtensionContext): void => {
		current.chain = current.chain.then(async () => {
			const bridge = running();
			const reply = bridge ? await bridge.post(kind, text, current.runId, ctx) : undefined;
			if (reply?.type === "posted") current.runId = reply.run_id;
			else if (ctx.hasUI) ctx.ui.notify(`piw-channels notify: the ${kind} notification was not posted (${reply?.type === "error" ? reply.message : downText()})`, "warning");
		});
	};
	const progress = (ctx: ExtensionContext): void => {
		const current = turn;
		if (!current) return;
		const state = sessionNotify(ctx);
		const now = Date.now();
		if (!state.on || now - current.startedAt < state.afterMs) return;
		if (current.lastProgressAt !== undefined && now - current.lastProgressAt < PROGRESS_EVERY_MS) return;
		current.lastProgressAt = now;
		const calls = `${current.toolCalls} tool call${current.toolCalls === 1 ? "" : "s"} so far`;
		postInTurn(current, "progress", `Working for ${spoken(now - current.startedAt)}: ${calls}`, ctx);
	};
	pi.on("agent_start", async (_event, ctx) => {
		if (turn?.timer) clearInterval(turn.timer);
		turn = { startedAt: Date.now(), toolCalls: 0, chain: Promise.resolve() };
		turn.timer = setInterval(() => progress(ctx), PROGRESS_CHECK_MS);
	});
	pi.on("tool_execution_end", async (_event, ctx) => {
		if (!turn) return;
		turn.toolCalls += 1;
		progress(ctx);
	});

	pi.on("session_shutdown", async (event) => {
		if (turn?.timer) clearInterval(turn.timer);
		turn = undefined;
		supervisor?.stop(event.reason);
		supervisor = undefined;
	});
	pi.on("agent_end", async (event, ctx) => {
		const last = [...event.messages].reverse().find((m) => (m as { role?: string }).role === "assistant") as
			| { stopReason?: string }
			| undefined;
		const bridge = running();
		if (bridge) bridge.stoppedByPerson = last?.stopReason === "aborted";
		const ended = turn;
		turn = undefined;
		if (ended) {
			if (ended.timer) clearInterval(ended.timer);
			const state = sessionNotify(ctx);
			const took = Date.now() - ended.startedAt;
			if (state.on && took >= state.afterMs) {
				const how = last?.stopReason === "aborted" ? "Stopped" : last?.stopReason === "error" ? "Failed" : "Done";
				const calls = `${ended.toolCalls} tool call${ended.toolCalls === 1 ? "" : "s"}`;
				postInTurn(ended, "final", `${how} after ${spoken(took)} (${calls}).\n\n${firstLines(last)}`, ctx);
			}
		}
		supervisor?.pump(ctx);
	});

	// A readable label instead of the raw custom type ("[piw-channels-decision]") in the TUI.
	const labels: [string, string, "accent" | "success" | "muted"][] = [
		[CUSTOM_TYPE, "Decision for you", "accent"],
		[TURN_TYPE, "Answer to a question", "success"],
		[SETTLED_TYPE, "Decided", "muted"],
		[NOTE_TYPE, "Notification", "accent"],
	];
	for (const [customType, label, color] of labels) {
		pi.registerMessageRenderer(customType, (message, _options, theme) => {
			const body = typeof message.content === "string" ? message.content : "";
			// An answer is "A person answered" only when one did (not a timeout or a cancel).
			const byPerson = (message.details as { byPerson?: boolean } | undefined)?.byPerson === true;
			const shown = customType === TURN_TYPE ? (byPerson ? "A person answered" : "Decision outcome") : label;
			const box = new Box(1, 1, (text) => theme.bg("customMessageBg", text));
			box.addChild(new Text(`${theme.fg(color, theme.bold(shown))}\n${body}`, 0, 0));
			return box;
		});
	}

	pi.registerTool({
		name: "ask_human",
		label: "Ask a person",
		description:
			"Ask the person a question and carry on without waiting: it is shown in this Pi session " +
			"(and on Telegram when configured). Returns at once with the decision id. When the person " +
			"answers, the answer (outcome, choice, exact text, who answered and where) arrives as a new " +
			"message that starts your next turn. You cannot answer it yourself.",
		promptSnippet: "ask the person a question; the answer arrives later as a new message",
		parameters: AskParams,
		async execute(_toolCallId, params) {
			const bridge = running();
			const reply = bridge ? await bridge.ask(params as Record<string, unknown>) : undefined;
			const { text, ok } = bridge
				? askedText(reply)
				: { text: `The question was not asked: ${downText()}`, ok: false };
			if (!ok) throw new Error(text); // the model sees a failed tool call (isError)
			return {
				content: [{ type: "text", text }],
				details: { decisionId: reply?.type === "asked" ? reply.decision_id : null, ok },
			};
		},
	});

	pi.registerCommand("ask", {
		description: "Ask a question (on Telegram too, when configured); the answer starts a model turn here",
		handler: async (args, ctx) => {
			const bridge = running();
			if (!bridge) {
				ctx.ui.notify(downText(), "error");
				return;
			}
			const title = args.trim() || (await ctx.ui.input("Question", "one line"))?.trim();
			if (!title) return;
			const typed = await ctx.ui.input("Choices, separated by commas", "Yes, No");
			if (typed === undefined) return;
			const labels = (typed.trim() ? typed : "Yes, No")
				.split(",")
				.map((label) => label.trim())
				.filter((label) => label.length > 0);
			const { text, ok } = askedText(await bridge.ask({ title, choices: choiceIds(labels) }));
			ctx.ui.notify(text.split(". ")[0] ?? text, ok ? "info" : "error");
		},
	});

	pi.registerCommand("decision", {
		description: "Answer an open Pi Workflows decision",
		handler: async (_args, ctx) => {
			const bridge = running();
			if (!bridge) {
				ctx.ui.notify(downText(), "error");
				return;
			}
			const open = [...bridge.open.values()];
			if (open.length === 0) {
				ctx.ui.notify("No open decisions", "info");
				return;
			}
			const titles = open.map((d, i) => `${i + 1}. ${d.title}`);
			// One open decision: straight to its choices, no one-item picker.
			const decision = open.length === 1 ? open[0] : open[titles.indexOf((await ctx.ui.select("Open decisions", titles)) ?? "")];
			if (!decision) return;
			const dialog = { controller: new AbortController(), settledBy: undefined as string | undefined };
			bridge.dialogs.set(decision.decision_id, dialog);
			let picked: { choice: Choice; text: string | undefined } | undefined;
			try {
				picked = await pickAnswer(ctx, decision, dialog.controller.signal);
			} finally {
				bridge.dialogs.delete(decision.decision_id);
			}
			if (dialog.settledBy !== undefined) {
				ctx.ui.notify(`Already decided: ${dialog.settledBy}`, "info");
				return;
			}
			if (!picked) return;
			const result = await bridge.answer(decision, picked.choice, picked.text);
			ctx.ui.notify(result ? describe(result) : "piw-channels did not answer in time", result ? "info" : "error");
		},
	});
}
