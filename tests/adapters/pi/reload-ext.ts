/** Test only: `/test-reload` reloads extensions in the same session, as Pi's `/reload` does. */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function reloadForTests(pi: ExtensionAPI): void {
	pi.registerCommand("test-reload", {
		description: "reload extensions (tests)",
		handler: async (_args, ctx) => {
			await ctx.reload();
		},
	});
}
