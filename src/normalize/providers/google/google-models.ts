/**
 * @module
 * `GET /v1beta/models` (and `/v1beta/models/{model}`) in Gemini's shape.
 * @see https://ai.google.dev/api/models
 */

export interface ListedModel {
  id: string
  /** Unix seconds. */
  created: number
}

export function googleModel(model: ListedModel) {
  return {
    name: `models/${model.id}`,
    baseModelId: model.id,
    version: '001',
    displayName: model.id,
    description: 'Served through Rollgate',
    supportedGenerationMethods: ['generateContent', 'streamGenerateContent', 'countTokens'],
  }
}

export function buildGoogleModelList(models: ListedModel[]) {
  return { models: models.map(googleModel) }
}
