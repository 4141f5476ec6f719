// A rollout's final answer as shown. The tag agent records the text between the first <answer>
// and the first </answer> of the reply, so a policy that opens the block twice
// (`<answer><answer>359</answer>` → "<answer>359"), misspells a closer inside it
// (`<answer>95</nswer></answer>` → "95</nswer>") or nests tags records those fragments as part of
// its answer. What is shown first is the answer with every tag-like fragment (`<…>` or `</…>`
// around a bare name) taken out; the text as recorded is kept beside it whenever it differs, so
// nothing the policy wrote is hidden.

const TAG = /<\/?[A-Za-z_][\w-]*>/g;

export interface DisplayAnswer {
  /** The answer without tag fragments, trimmed ('' when nothing is left). */
  answer: string;
  /** The text as recorded, when it held tag fragments. */
  recorded?: string;
}

export function displayAnswer(finalAnswer: string): DisplayAnswer {
  const answer = finalAnswer.replace(TAG, '').trim();
  return answer === finalAnswer.trim() ? { answer } : { answer, recorded: finalAnswer };
}
