/**
 * Test only: the tool `test_clock_advance {seconds}` moves this Pi's clock (`Date.now`) ahead,
 * so that an agent turn "lasts" minutes without the test waiting for them.
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";

export default function clockForTests(pi: ExtensionAPI): void {
	let offset = 0;
	const real = Date.now.bind(Date);
	Date.now = () => real() + offset;
	pi.registerTool({
		name: "test_clock_advance",
		label: "Advance the clock",
		description: "Tests only: move the clock ahead by some seconds",
		parameters: Type.Object({ seconds: Type.Number() }),
		async execute(_toolCallId, params) {
			offset += (params as { seconds: number }).seconds * 1000;
			return { content: [{ type: "text", text: "the clock moved" }], details: {} };
		},
	});
}
