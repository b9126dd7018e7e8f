'use strict';
// A validator of the JSON Schema subset the tool and structured-output tests use (OpenAI's strict
// mode): type (one or a list), properties, required, additionalProperties false, enum, const,
// minimum/maximum, minLength/maxLength, items, minItems/maxItems. validate(schema, value) returns
// the problems, [] when valid. Not a test file itself: the *.test.cjs files require it.
function validate(schema, value, path = '$') {
  const problems = [];
  const typeOf = (v) => {
    if (v === null) return 'null';
    if (Array.isArray(v)) return 'array';
    if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
    return typeof v;
  };
  if (schema.type !== undefined) {
    const types = [].concat(schema.type);
    const t = typeOf(value);
    const ok = types.includes(t) || (t === 'integer' && types.includes('number'));
    if (!ok) return [`${path}: ${t}, not ${types.join('|')}`];
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    problems.push(`${path}: ${JSON.stringify(value)} not in the enum`);
  }
  if ('const' in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) {
    problems.push(`${path}: not the const`);
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${path} < minimum`);
    if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${path} > maximum`);
  }
  if (typeof value === 'string') {
    const n = [...value].length;
    if (schema.minLength !== undefined && n < schema.minLength) problems.push(`${path} too short`);
    if (schema.maxLength !== undefined && n > schema.maxLength) problems.push(`${path} too long`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(`${path}: few`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(`${path}: many`);
    if (schema.items) value.forEach((v, i) => problems.push(...validate(schema.items, v, `${path}[${i}]`)));
  }
  if (typeOf(value) === 'object') {
    const props = schema.properties || {};
    for (const r of schema.required || []) {
      if (!(r in value)) problems.push(`${path}.${r} is missing`);
    }
    for (const [k, v] of Object.entries(value)) {
      if (k in props) problems.push(...validate(props[k], v, `${path}.${k}`));
      else if (schema.additionalProperties === false) problems.push(`${path}.${k} is not allowed`);
    }
  }
  return problems;
}

// The weather and time tools' parameters and a person, as the chat, Responses and Anthropic tests
// ask for them.
const weatherParameters = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
};

const timeParameters = {
  type: 'object',
  properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } },
  required: ['zone'],
  additionalProperties: false,
};

const personSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 10 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    verified: { type: 'boolean' },
  },
  required: ['name', 'age', 'verified'],
  additionalProperties: false,
};

module.exports = { validate, weatherParameters, timeParameters, personSchema };
