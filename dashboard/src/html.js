// htm bound to preact's h: JSX-like templates without a compile step of their own.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
