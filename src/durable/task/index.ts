/** @module Task Durable Object and its plain classes. */
export { TaskObject } from './task-object.ts'
export type { TaskRpc } from './task-object.ts'
export { sessionResultKey, taskResultKey } from './task-keys.ts'
