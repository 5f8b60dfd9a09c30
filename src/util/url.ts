/**
 * `url` as logs, Events and errors may show it: with no userinfo, and its query or fragment
 * replaced by `?…` (`#…`), where tokens and signatures travel. Text that is not a URL is cut the
 * same way, so a config error may quote it.
 */
export function redactUrl(url: string): string {
  const cut = url.search(/[?#]/);
  const head = cut === -1 ? url : url.slice(0, cut);
  return `${head.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/]*@/i, '$1')}${cut === -1 ? '' : `${url[cut]}…`}`;
}
