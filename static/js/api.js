// The REST API (/api/v1) with the browser session: one call, its answer as {ok, status, data}; never throws.

export function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

export async function api(method, url, body) {
  const options = { method: method, credentials: "same-origin", headers: { Accept: "application/json", "X-CSRFToken": csrfToken() } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, options);
  } catch (e) {
    return { ok: false, status: 0, data: { error: { message: "The server did not answer." } } };
  }
  let data = null;
  if (response.status !== 204) {
    try { data = await response.json(); } catch (e) { data = null; }
  }
  return { ok: response.ok, status: response.status, data: data };
}

// What an error answer ({"error": {code, message}}) says, for a person.
export function errorText(result) {
  const err = result.data && result.data.error;
  if (!err) return "Failed (HTTP " + result.status + ").";
  return err.message || err.code || "Failed.";
}
