// The page's Content-Security-Policy admits styles only from this server or carrying the
// per-load nonce (no 'unsafe-inline'). xterm.js creates <style> elements and sets style
// attributes at run time, so: stamp the nonce on every <style> at creation (before it is
// inserted, or the sheet stays empty), and route style attributes through the CSSOM,
// which CSP does not govern. Imported first by app.js, before xterm.js runs.
const nonce = document.querySelector('meta[name="style-nonce"]')?.content || '';
const createElement = Document.prototype.createElement;
Document.prototype.createElement = function (name, options) {
  const element = createElement.call(this, name, options);
  if (nonce && String(name).toLowerCase() === 'style') element.setAttribute('nonce', nonce);
  return element;
};
const setAttribute = Element.prototype.setAttribute;
Element.prototype.setAttribute = function (name, value) {
  if (String(name).toLowerCase() === 'style' && this.style) {
    this.style.cssText = String(value);
    return undefined;
  }
  return setAttribute.call(this, name, value);
};
