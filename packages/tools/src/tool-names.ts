// The one table between the short names people type (`flowgrpo solve --tools python`) and the
// names the built-in tools carry. The long names are the canonical ones: they are what the
// AgentFlow seeds' planner was trained on and what every prompt, trace, memory entry and result
// shows, so a policy trained here reads the same toolbox as the seeds'. The short names are
// accepted wherever a tool is looked up by name (ToolRegistry.get/has/run/…).

/** Short alias → canonical name of each built-in tool (documented in the package README). */
export const BUILTIN_TOOL_ALIASES: Readonly<Record<string, string>> = Object.freeze({
  python: 'Python_Code_Generator_Tool',
  calculator: 'calculator',
  wikipedia: 'Wikipedia_RAG_Search_Tool',
  web_rag: 'Web_RAG_Search_Tool',
  web_search: 'Web_Search_Tool',
  generalist: 'Generalist_Solution_Generator_Tool',
});

/**
 * The short alias of a built-in tool given either its alias or its canonical name, in any case
 * (`'Python'`, `'python_code_generator_tool'` → `'python'`); undefined for other names.
 */
export function builtinToolAlias(name: string): string | undefined {
  const wanted = name.trim().toLowerCase();
  for (const [alias, canonical] of Object.entries(BUILTIN_TOOL_ALIASES)) {
    if (alias === wanted || canonical.toLowerCase() === wanted) return alias;
  }
  return undefined;
}

/** The canonical name for a built-in alias (`'python'` → `'Python_Code_Generator_Tool'`), else `name`. */
export function canonicalToolName(name: string): string {
  const alias = builtinToolAlias(name);
  return alias === undefined ? name : BUILTIN_TOOL_ALIASES[alias]!;
}
