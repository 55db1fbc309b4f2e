/**
 * @module
 * `session_completed`: reward 1 when the agent finished on its own, 0 after a failure or timeout
 * (Polar §21). Also run by the edge itself when no runner evaluates.
 */
import { parseEvaluatorConfig } from '../../src/contract/evaluator-config.ts'
import type { Evaluator } from './evaluator.ts'

export const sessionCompleted: Evaluator = {
  name: 'session_completed',
  validate(config) {
    parseEvaluatorConfig('session_completed', config)
  },
  async evaluate(context) {
    const completed = context.agentResult.status === 'completed'
    return {
      outcome_reward: completed ? 1 : 0,
      trace_rewards: null,
      metadata: { agent_status: context.agentResult.status, resolved: completed },
    }
  },
}
